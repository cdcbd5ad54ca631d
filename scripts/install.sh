#!/usr/bin/env bash
# The first step of every gpugate action: put the step's commands where
# scripts/action.sh runs them from, in seconds.
#
# Used at a release tag (vMAJOR.MINOR.PATCH, with or without a pre-release
# suffix), it downloads that release's archive for the runner's OS and
# architecture and its checksums.txt, checks the archive's SHA-256 against
# the list BEFORE it is extracted or anything in it runs, and refuses a
# mismatch. Used anywhere else (a commit SHA, a branch, a tag with no
# release, a platform the release has no binaries for), it says why in the
# log and outputs build=true: the action then sets up Go and
# scripts/action.sh builds the commands from the Action's own checkout, as
# it always did.
#
# Environment (the action's step passes them; none is a secret):
#   GPUGATE_ACTION_REF   the ref the Action is used at (github.action_ref),
#                        used only when ACTION_PATH is no .../_actions/O/R/REF/
#   GPUGATE_STEP         the step, for the commands it needs
#   GPUGATE_COMMANDS     step install: the commands
#   ACTION_PATH          the Action's checkout
#   RUNNER_OS RUNNER_ARCH RUNNER_TEMP   as the runner sets them
#   GPUGATE_RELEASE_URL  tests only: where releases are downloaded from
#                        (default https://github.com/gpugate/gpugate/releases/download)
# Outputs: bin (the directory of the verified commands; empty when they are
# built from source), build (true when Go is needed to build them).
#
# No token is sent anywhere: the release is public, and its download
# redirects to another host.
set -euo pipefail

base="${GPUGATE_RELEASE_URL:-https://github.com/gpugate/gpugate/releases/download}"
action="${ACTION_PATH:-$(dirname "$0")/..}"
out="${GITHUB_OUTPUT:-/dev/null}"
tmp_root="${RUNNER_TEMP:-${TMPDIR:-/tmp}}"

# The commands a step runs (scripts/action.sh's programs for it).
case "${GPUGATE_STEP:-classify}" in
classify) cmds=(classify) ;;
authorize | reuse | publish | local-relay | recover) cmds=(gate) ;;
provision) cmds=(provision smoke) ;; # smoke: the CUDA proof the pod runs
watch | cleanup | reap) cmds=("$GPUGATE_STEP") ;;
partition-check | partition-select) cmds=(partition) ;;
cache-check) cmds=(cachecheck) ;;
cost-report) cmds=(costreport) ;;
cuda-tree) cmds=(cachecheck smoke) ;;
install) read -r -a cmds <<<"${GPUGATE_COMMANDS:-partition}" ;;
*) cmds=() ;; # free-disk runs none; an unknown step fails in action.sh
esac

from_source() { # from_source REASON [BIN]: BIN holds some verified commands
	echo "gpugate: building ${cmds[*]:-nothing} from source (the Action's checkout) because $1"
	{
		echo "bin=${2:-}"
		echo "build=true"
	} >>"$out"
	exit 0
}
installed() { # installed BIN MESSAGE
	local c missing=()
	for c in "${cmds[@]}"; do [ -x "$1/$c" ] || missing+=("$c"); done
	# The proof runs on the pods (linux/amd64): a release's smoke is built
	# for the runner, so on any other runner Go builds the proof for them.
	if [ "${GPUGATE_STEP:-}" = provision ] && [ "$os/$arch" != linux/amd64 ] && [ ${#missing[@]} -eq 0 ]; then
		cmds=(smoke)
		from_source "the proof (smoke) runs on the pods, linux/amd64, and release $ref's is for $os/$arch" "$1"
	fi
	if [ ${#missing[@]} -gt 0 ]; then
		cmds=("${missing[@]}")
		from_source "release $ref has no ${missing[*]} for $os/$arch" "$1"
	fi
	echo "gpugate: $2"
	{
		echo "bin=$1"
		echo "build=false"
	} >>"$out"
	exit 0
}

# The ref the runner checked this Action out at, _actions/OWNER/REPO/REF/,
# is the one whose scripts run: it comes first. github.action_ref is only
# the fallback (a checkout elsewhere): inside another composite action it is
# the OUTER action's ref (actions/runner#2473), another release's binaries.
ref=""
path=$(cd "$action" 2>/dev/null && pwd) || path=""
case "$path" in
*/_actions/*/*/*)
	rest=${path##*/_actions/}
	rest=${rest#*/}
	rest=${rest#*/}
	ref=${rest%%/*}
	;;
esac
[ -n "$ref" ] || ref="${GPUGATE_ACTION_REF:-}"
[ -n "$ref" ] || from_source "the Action's ref is unknown (a local checkout, uses: ./)"
# A pin to a released commit's SHA is that release: the tag that names
# the commit (read with git ls-remote, no token) is installed and verified
# as a tag pin is. A SHA no release tag names builds from source.
if [[ "$ref" =~ ^[0-9a-f]{40}$ ]] && command -v git >/dev/null; then
	tag=$(git ls-remote --tags "${GPUGATE_RELEASE_REPO:-https://github.com/gpugate/gpugate}" 2>/dev/null |
		awk -v sha="$ref" '$1 == sha { t = $2; sub("^refs/tags/", "", t); sub("\\^\\{\\}$", "", t); print t }' |
		grep -E '^v[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]+)?$' | sort -V | tail -n 1 || true)
	if [ -n "$tag" ]; then
		echo "gpugate: $ref is release $tag"
		ref=$tag
	fi
fi
if ! [[ "$ref" =~ ^v[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]+)?$ ]]; then
	from_source "$ref is not a release (releases are tags vMAJOR.MINOR.PATCH)"
fi

case "${RUNNER_OS:-$(uname -s)}" in
Linux | linux) os=linux ;;
macOS | Darwin | darwin) os=darwin ;;
*) from_source "release $ref has no binaries for ${RUNNER_OS:-$(uname -s)}" ;;
esac
case "${RUNNER_ARCH:-$(uname -m)}" in
X64 | x86_64 | amd64) arch=amd64 ;;
ARM64 | aarch64 | arm64) arch=arm64 ;;
*) from_source "release $ref has no binaries for ${RUNNER_ARCH:-$(uname -m)}" ;;
esac

archive="gpugate_${ref#v}_${os}_${arch}.tar.gz"
# Installed once per job: RUNNER_TEMP is the job's own.
dir="$tmp_root/gpugate-release/${ref}_${os}_${arch}"
sums() { # sums FILE...: SHA-256 lines, sha256sum's format
	if command -v sha256sum >/dev/null; then sha256sum -- "$@"; else shasum -a 256 -- "$@"; fi
}
if [ -f "$dir/.verified" ]; then
	# A later step of the job checks the installed commands again: an
	# earlier step's code may have changed them since.
	if ! (cd "$dir" && awk 'NR > 1' .verified >"$tmp_root/.gpugate-recheck.$$" && sums $(awk '{ print $2 }' "$tmp_root/.gpugate-recheck.$$") | cmp -s - "$tmp_root/.gpugate-recheck.$$"); then
		rm -f "$tmp_root/.gpugate-recheck.$$"
		echo "::error::gpugate: the commands of release $ref installed in $dir changed since they were verified: refusing to run them"
		exit 1
	fi
	rm -f "$tmp_root/.gpugate-recheck.$$"
	installed "$dir" "release $ref ($os/$arch) already installed in this job, checked again: $dir"
fi

mkdir -p "$tmp_root"
work=$(mktemp -d "$tmp_root/gpugate-download.XXXXXX")
trap 'rm -rf -- "$work"' EXIT

fetch() { # fetch URL FILE: sets status, the HTTP status (000: no answer), and got, curl's exit
	got=0
	# -L: GitHub answers a release download with a redirect to its object
	# store; no credentials are given, so none can follow the redirect.
	status=$(curl -sSL --proto-redir =https --connect-timeout 10 --max-time 300 --retry 2 \
		-o "$2" -w '%{http_code}' "$1" 2>"$work/curl-error") || got=$?
}
unreachable() { # unreachable URL: a download that broke builds from source
	echo "::warning::gpugate: could not download $1 (HTTP $status, curl exit $got: $(head -c 300 "$work/curl-error")); building from source instead"
	from_source "the download of release $ref failed"
}

fetch "$base/$ref/$archive" "$work/$archive"
if [ "$status" = 404 ]; then
	from_source "$ref is not a release: $base/$ref/$archive is not there"
fi
[ "$status" = 200 ] && [ "$got" = 0 ] || unreachable "$base/$ref/$archive"
# From here the release exists: it verifies, or the step fails. A release
# that cannot prove its archive is never run, and never quietly replaced.
fetch "$base/$ref/checksums.txt" "$work/checksums.txt"
if [ "$status" = 404 ]; then
	echo "::error::gpugate: release $ref has $archive but no checksums.txt (HTTP 404): refusing to run an unverified binary"
	exit 1
fi
[ "$status" = 200 ] && [ "$got" = 0 ] || unreachable "$base/$ref/checksums.txt"
want=$(awk -v f="$archive" '$2 == f || $2 == "*" f { print $1 }' "$work/checksums.txt")
if ! [[ "$want" =~ ^[0-9a-f]{64}$ ]]; then
	echo "::error::gpugate: release $ref's checksums.txt lists no single SHA-256 for $archive: refusing to run an unverified binary"
	exit 1
fi
if command -v sha256sum >/dev/null; then
	got=$(sha256sum "$work/$archive")
else
	got=$(shasum -a 256 "$work/$archive") # macOS
fi
got=${got%% *}
if [ "$got" != "$want" ]; then
	echo "::error::gpugate: refusing $archive of release $ref: its SHA-256 is $got, but the release's checksums.txt lists $want"
	exit 1
fi

mkdir -p "$work/bin"
tar -xzf "$work/$archive" -C "$work/bin"
# The archive's sum, then each file's, for a later step to check.
{
	echo "$got  $archive"
	(cd "$work/bin" && find . -type f -print | LC_ALL=C sort | while IFS= read -r f; do sums "$f"; done)
} >"$work/verified"
mv "$work/verified" "$work/bin/.verified"
mkdir -p "$(dirname "$dir")"
rm -rf -- "$dir" # a download interrupted before it was verified
mv "$work/bin" "$dir"
installed "$dir" "installed release $ref ($os/$arch, $archive sha256 $got) in $dir"
