#!/usr/bin/env bash
# Builds a release's archives: release.sh TAG OUTDIR
#
# One archive per OS/arch, gpugate_<version>_<os>_<arch>.tar.gz (version:
# TAG without its v), holding the commands flat, and OUTDIR/checksums.txt
# (sha256sum format). Linux (amd64, arm64) gets every examples/ command,
# which the actions run; macOS (amd64, arm64) the CLIs a person runs on a
# laptop. scripts/install.sh reads exactly these names.
#
# Plain `go build` rather than goreleaser: these are pure-Go commands
# cross-compiled with CGO_ENABLED=0, so the build is one loop, and there is
# no release tool to pin, verify and keep up to date.
#
# Reproducible: the same commit builds the same bytes anywhere (-trimpath,
# no VCS stamp, no build ID; sorted archive members with fixed owners,
# modes and mtime, SOURCE_DATE_EPOCH or the commit's time; gzip -n). The
# proof (smoke) is built with smoke.ProofBuildArgs' -gcflags=all=-l, as
# the Action builds it from source: it travels in the pod's create request.
#
# GPUGATE_RELEASE_PLATFORMS (e.g. "linux/amd64") limits the platforms, for
# a local try.
set -euo pipefail

[ $# -eq 2 ] || {
	echo "usage: release.sh TAG OUTDIR" >&2
	exit 2
}
tag=$1
out=$2
[[ "$tag" =~ ^v[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]+)?$ ]] || {
	echo "release.sh: $tag is not a release tag (vMAJOR.MINOR.PATCH)" >&2
	exit 2
}
cd "$(dirname "$0")/.."
version=${tag#v}
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}

commands=()
for m in examples/*/main.go; do
	c=${m#examples/}
	commands+=("${c%/main.go}")
done
# What a person runs on a laptop; the rest runs on CI runners and pods.
clis=(cachecheck classify costreport nvrtcpin partition sparkctl)

read -r -a platforms <<<"${GPUGATE_RELEASE_PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}"
mkdir -p "$out"
out=$(cd "$out" && pwd)
stage=$(mktemp -d)
trap 'rm -rf -- "$stage"' EXIT
archives=()
for p in "${platforms[@]}"; do
	os=${p%/*}
	arch=${p#*/}
	case "$os" in
	linux) cmds=("${commands[@]}") ;;
	darwin) cmds=("${clis[@]}") ;;
	*)
		echo "release.sh: no release for $os" >&2
		exit 2
		;;
	esac
	dir="$stage/${os}_${arch}"
	mkdir -p "$dir"
	for c in "${cmds[@]}"; do
		flags=(-trimpath -buildvcs=false "-ldflags=-s -w -buildid=")
		[ "$c" != smoke ] || flags+=(-gcflags=all=-l)
		echo "== $os/$arch $c"
		CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build "${flags[@]}" -o "$dir/$c" "./examples/$c"
	done
	cp LICENSE "$dir/LICENSE"
	chmod 0755 "$dir"/*
	chmod 0644 "$dir/LICENSE"
	name="gpugate_${version}_${os}_${arch}.tar.gz"
	(cd "$dir" && LC_ALL=C tar --sort=name --format=gnu --owner=0 --group=0 --numeric-owner \
		--mtime="@$epoch" -cf - -- *) | gzip -9 -n >"$out/$name"
	archives+=("$name")
done
(cd "$out" && sha256sum -- "${archives[@]}" >checksums.txt)
cat "$out/checksums.txt"
