#!/usr/bin/env bash
# The composite Action's dispatcher (action.yml and the per-step actions):
# maps the step input and the GPUGATE_* environment to one example
# program's flags. Inputs arrive as environment variables and are passed as
# separate arguments, never evaluated. Paths are relative to the workspace.
#
# The programs are the verified release binaries scripts/install.sh put in
# GPUGATE_BIN, or, where it has none (the Action used at a commit, a
# branch, an unreleased tag), built here from the Action's own checkout.
set -euo pipefail

ws="${GITHUB_WORKSPACE:-$PWD}"
action="${ACTION_PATH:-$(dirname "$0")/..}" # the Action's own (pinned) checkout
rel() { case "$1" in /*) printf '%s' "$1" ;; *) printf '%s/%s' "$ws" "$1" ;; esac; }
fail() { echo "::error::gpugate: $*"; exit 1; }
sim=()
if [ "${GPUGATE_SIMULATE:-false}" = true ]; then sim=(-simulate); fi
need() { # need VALUE "what is missing"
	[ -n "$1" ] || fail "$2"
}
program() { # program NAME: prints the path of examples/NAME's command
	if [ -n "${GPUGATE_BIN:-}" ] && [ -x "$GPUGATE_BIN/$1" ]; then
		printf '%s' "$GPUGATE_BIN/$1"
		return
	fi
	local cmd="${RUNNER_TEMP:-/tmp}/gpugate-run/$1"
	(cd "$action" && go build -o "$cmd" "./examples/$1") >&2 || return 1
	printf '%s' "$cmd"
}
partition_files() { # the partition-files input, as arguments
	local f files
	read -r -a files <<<"$GPUGATE_PARTITION_FILES"
	for f in "${files[@]}"; do args+=("$(rel "$f")"); done
}

args=()
case "${GPUGATE_STEP:-classify}" in
classify)
	prog=classify
	need "${GPUGATE_POLICY:-}" "step classify needs the policy input (path of the change policy)"
	args=(-policy "$(rel "$GPUGATE_POLICY")")
	if [ "${GPUGATE_CHECK_GLOBS:-false}" = true ]; then
		args+=(-dir "$ws" -check-globs)
	elif [ -n "${GPUGATE_BASE:-}" ]; then
		args+=(-base "$GPUGATE_BASE" -head "${GPUGATE_HEAD:-HEAD}" -dir "$ws")
	elif [ -n "${GPUGATE_PR:-}" ]; then
		args+=(-pr "$GPUGATE_PR" -repo "$GITHUB_REPOSITORY")
	else
		fail "set base (and head) or pr: there is no change to classify"
	fi
	;;
authorize)
	prog=gate
	need "${GPUGATE_PR:-}" "step authorize needs the pr input"
	args=(authorize -actor "${GPUGATE_ACTOR:-}" -pr "$GPUGATE_PR")
	[ -z "${GPUGATE_CLASSIFIED_HEAD:-}" ] || args+=(-classified-head "$GPUGATE_CLASSIFIED_HEAD")
	;;
reuse)
	prog=gate
	need "${GPUGATE_HEAD_SHA:-}" "step reuse needs head-sha and tested-ref (the authorize step's outputs)"
	need "${GPUGATE_TESTED_REF:-}" "step reuse needs head-sha and tested-ref (the authorize step's outputs)"
	args=(reuse -head "$GPUGATE_HEAD_SHA" -tested-ref "$GPUGATE_TESTED_REF")
	;;
publish)
	prog=gate
	need "${GPUGATE_KIND:-}" "step publish needs the kind input"
	args=(publish -head "${GPUGATE_HEAD_SHA:-}" -tested-ref "${GPUGATE_TESTED_REF:-}" -kind "$GPUGATE_KIND")
	[ -z "${GPUGATE_GPU_REQUIRED:-}" ] || args+=(-gpu-required "$GPUGATE_GPU_REQUIRED")
	[ -z "${GPUGATE_REASON:-}" ] || args+=(-reason "$GPUGATE_REASON")
	[ -z "${GPUGATE_CLASSIFIED_HEAD:-}" ] || args+=(-classified-head "$GPUGATE_CLASSIFIED_HEAD")
	[ -z "${GPUGATE_TESTS_PASSED:-}" ] || args+=(-tests-passed "$GPUGATE_TESTS_PASSED")
	[ -z "${GPUGATE_REUSED_FROM_ID:-}" ] || args+=(-reused-from-id "$GPUGATE_REUSED_FROM_ID")
	[ -z "${GPUGATE_NOT_RUN:-}" ] || args+=(-not-run "$GPUGATE_NOT_RUN")
	# With the PR, publish re-reads its local-validation label first.
	[ -z "${GPUGATE_PR:-}" ] || args+=(-pr "$GPUGATE_PR")
	;;
provision)
	prog=provision
	args=("${sim[@]}" -image "${GPUGATE_IMAGE:-ghcr.io/actions/actions-runner:latest}")
	[ -z "${GPUGATE_CONFIG:-}" ] || args+=(-config "$(rel "$GPUGATE_CONFIG")")
	[ -z "${GPUGATE_NVRTC_TIERS:-}" ] || args+=(-nvrtc-tiers "$(rel "$GPUGATE_NVRTC_TIERS")")
	if [ -n "${GPUGATE_PROOF_PATH:-}" ]; then
		args+=(-proof-path "$GPUGATE_PROOF_PATH")
	elif [ ${#sim[@]} -eq 0 ] && [ -n "${GPUGATE_BIN:-}" ] && [ -x "$GPUGATE_BIN/smoke" ] &&
		[[ "${RUNNER_ARCH:-$(uname -m)}" =~ ^(X64|x86_64|amd64)$ ]]; then
		# The release's smoke is the proof, built with smoke.ProofBuildArgs
		# (scripts/release.sh), for the runner: the pods' linux/amd64 only on
		# an x86-64 runner (elsewhere install.sh has Go build it below).
		args+=(-proof "$GPUGATE_BIN/smoke")
	elif [ ${#sim[@]} -eq 0 ]; then
		# The CUDA proof is built from the Action's own (pinned) checkout,
		# never from the pull request, and travels in each pod's create
		# request. The arguments are smoke.ProofBuildArgs, for the pods'
		# platform (smoke.ProofPlatform) whatever the runner's.
		proof="${RUNNER_TEMP:-/tmp}/gpugate-smoke"
		(cd "$action" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -gcflags=all=-l "-ldflags=-s -w" -o "$proof" ./examples/smoke)
		args+=(-proof "$proof")
	fi
	[ -z "${GPUGATE_ORG:-}" ] || args+=(-org "$GPUGATE_ORG")
	[ "${GPUGATE_KEEP_FAILED_PODS:-false}" != true ] || args+=(-keep-failed-pods)
	if [ -n "${GPUGATE_PR:-}" ] && [ -n "${GPUGATE_HEAD_SHA:-}" ]; then args+=(-pr "$GPUGATE_PR" -head "$GPUGATE_HEAD_SHA"); fi
	;;
watch)
	prog=watch
	if [ ${#sim[@]} -eq 0 ]; then
		need "${GPUGATE_POD_ID:-}" "step watch needs pod-id (the provision step's pod_id)"
		args=(-pod "$GPUGATE_POD_ID" -repo "$GITHUB_REPOSITORY" -run-id "$GITHUB_RUN_ID" -run-attempt "${GITHUB_RUN_ATTEMPT:-1}"
			-job "${GPUGATE_JOB:-Run GPU tests}" -test-step "${GPUGATE_TEST_STEP:-Run CUDA tests from archive}")
		if [ -n "${GPUGATE_PR:-}" ] && [ -n "${GPUGATE_HEAD_SHA:-}" ]; then args+=(-pr "$GPUGATE_PR" -head "$GPUGATE_HEAD_SHA"); fi
	else
		args=("${sim[@]}")
	fi
	;;
cleanup)
	prog=cleanup
	args=("${sim[@]}" -out "${RUNNER_TEMP:-/tmp}/cost-report.json")
	[ ${#sim[@]} -gt 0 ] || args+=(-pod "${GPUGATE_POD_ID:-}")
	[ -z "${GPUGATE_TESTED_REF:-}" ] || args+=(-tested-ref "$GPUGATE_TESTED_REF")
	[ -z "${GPUGATE_KIND:-}" ] || args+=(-gate-kind "$GPUGATE_KIND")
	[ -z "${GPUGATE_MARKS_FILE:-}" ] || args+=(-marks "$(rel "$GPUGATE_MARKS_FILE")")
	[ -z "${GPUGATE_JOB:-}" ] || args+=(-job "$GPUGATE_JOB")
	[ -z "${GPUGATE_TEST_STEP:-}" ] || args+=(-test-step "$GPUGATE_TEST_STEP")
	[ -z "${GPUGATE_CACHE_OBSERVATIONS:-}" ] || args+=(-cache "$GPUGATE_CACHE_OBSERVATIONS")
	if [ -n "${GPUGATE_PROVISION_RESULT:-}" ]; then
		printf '%s' "$GPUGATE_PROVISION_RESULT" > "${RUNNER_TEMP:-/tmp}/provision-result.json"
		args+=(-provision "${RUNNER_TEMP:-/tmp}/provision-result.json")
	elif [ -n "${GPUGATE_PROVISION_FILE:-}" ]; then
		args+=(-provision "$(rel "$GPUGATE_PROVISION_FILE")")
	fi
	;;
reap)
	prog=reap
	if [ ${#sim[@]} -eq 0 ]; then
		args=(-repo "$GITHUB_REPOSITORY" -workflow "${GPUGATE_WORKFLOW:-.github/workflows/runpod-gpu-test.yml}")
	else
		args=("${sim[@]}")
	fi
	# The decisions are the independent recovery record: upload this file.
	args+=(-out "${RUNNER_TEMP:-/tmp}/reap-decisions.json")
	# Executing, it also cancels an expired pod's still-active run, only
	# after the pod's deletion is confirmed (the job's actions: write).
	[ "${GPUGATE_EXECUTE:-false}" != true ] || args+=(-execute -cancel-runs)
	;;
partition-check)
	prog=partition
	need "${GPUGATE_PARTITION_FILES:-}" "step partition-check needs partition-files"
	args=(check -format "${GPUGATE_FORMAT:-nextest}")
	[ -z "${GPUGATE_INVENTORY:-}" ] || args+=(-inventory "$(rel "$GPUGATE_INVENTORY")")
	partition_files
	;;
partition-select)
	prog=partition
	need "${GPUGATE_PARTITION_FILES:-}" "step partition-select needs partition-files"
	args=(select -category "${GPUGATE_CATEGORY:-single-gpu}")
	if [ "${GPUGATE_REQUIRE_TESTS:-true}" = true ]; then args+=(-require-tests); fi
	partition_files
	;;
cache-check)
	prog=cachecheck
	args=(-dir "$ws")
	if [ -n "${GPUGATE_FIND_ARTIFACT:-}" ]; then
		args=(-find "$GPUGATE_FIND_ARTIFACT")
		[ -z "${GPUGATE_TRUSTED_WORKFLOWS:-}" ] || args+=(-trusted "$GPUGATE_TRUSTED_WORKFLOWS")
	elif [ "${GPUGATE_CACHE_KEY:-false}" = true ]; then
		args+=(-key)
		[ -z "${GPUGATE_KEY_SPEC:-}" ] || args+=(-spec "$(rel "$GPUGATE_KEY_SPEC")")
		[ -z "${GPUGATE_TOOLCHAIN:-}" ] || args+=(-toolchain "$GPUGATE_TOOLCHAIN")
	fi
	[ -z "${GPUGATE_RULES:-}" ] || args+=(-rules "$(rel "$GPUGATE_RULES")")
	;;
local-relay)
	prog=gate
	need "${GPUGATE_PR:-}" "step local-relay needs pr and head-sha"
	need "${GPUGATE_HEAD_SHA:-}" "step local-relay needs pr and head-sha"
	args=(local-relay -dispatcher "${GPUGATE_ACTOR:-}" -pr "$GPUGATE_PR" -sha "$GPUGATE_HEAD_SHA")
	;;
recover)
	prog=gate
	need "${GPUGATE_PR:-}" "step recover needs pr"
	args=(recover -pr "$GPUGATE_PR" -workflow "$(basename "${GPUGATE_WORKFLOW:-runpod-gpu-test.yml}")")
	;;
cost-report)
	prog=costreport
	need "${GPUGATE_EVIDENCE_DIR:-}" "step cost-report needs evidence-dir"
	args=(summarize -dir "$(rel "$GPUGATE_EVIDENCE_DIR")" -out "${RUNNER_TEMP:-/tmp}/cost-summary")
	;;
install)
	# gpugate's own commands for a job that runs several (a long build's
	# chain links), built once from the Action's pinned checkout.
	read -r -a cmds <<<"${GPUGATE_COMMANDS:-partition}"
	bin="${RUNNER_TEMP:-/tmp}/gpugate-bin"
	mkdir -p "$bin"
	for c in "${cmds[@]}"; do
		[[ -n "$c" && "$c" != *[!a-z]* && -f "$action/examples/$c/main.go" ]] || fail "step install: unknown command \"$c\": want one of gpugate's examples/ programs (partition, cachecheck, smoke, ...)"
		if [ -n "${GPUGATE_BIN:-}" ] && [ -x "$GPUGATE_BIN/$c" ]; then
			cp -- "$GPUGATE_BIN/$c" "$bin/$c"
		else
			(cd "$action" && CGO_ENABLED=0 go build -trimpath -o "$bin/$c" "./examples/$c")
		fi
	done
	echo "$bin" >>"${GITHUB_PATH:-/dev/null}"
	echo "bin=$bin" >>"${GITHUB_OUTPUT:-/dev/null}"
	echo "gpugate: installed ${cmds[*]} in $bin"
	exit 0
	;;
free-disk)
	# The compile-sharding ADR's first escape hatch: a hosted runner's
	# unused toolchains, deleted before a long CUDA build (default on).
	read -r -a paths <<<"${GPUGATE_FREE_PATHS:-/usr/share/dotnet /usr/local/lib/android /opt/ghc /usr/local/.ghcup /usr/share/swift}"
	avail() { df -Pk / | awk 'NR == 2 { print $4 }'; }
	before=$(avail)
	for p in "${paths[@]}"; do
		case "$p" in
		/?*) ;;
		*) fail "step free-disk: \"$p\" is not an absolute path" ;;
		esac
		[ -e "$p" ] || continue
		if [ -w "$(dirname "$p")" ]; then rm -rf -- "$p"; else sudo -n rm -rf -- "$p"; fi
	done
	after=$(avail)
	echo "freed_kib=$((after > before ? after - before : 0))" >>"${GITHUB_OUTPUT:-/dev/null}"
	echo "gpugate: free-disk: $((after / 1024)) MiB available on / (was $((before / 1024)) MiB)"
	exit 0
	;;
cuda-tree)
	# The CUDA trees: a restored toolkit or runtime
	# tree is used (or published) only after it proves itself; a miss, or
	# a reader's rejected restore, installs normally. Only the publisher
	# saves the cache, so there a rejected restore fails instead.
	tree="${GPUGATE_TREE:-}"
	need "${GPUGATE_TREE:-}" "step cuda-tree needs tree, the tree's fixed absolute path"
	case "$tree" in
	/?*) ;;
	*) fail "step cuda-tree needs tree, the tree's fixed absolute path (got \"$tree\")" ;;
	esac
	need "${GPUGATE_INSTALL_SCRIPT:-}" "step cuda-tree needs install-script (run with the tree's path on a miss or a rejected restore)"
	[ -n "${GPUGATE_REQUIRE:-}${GPUGATE_COMPILE_ARCH:-}" ] || fail "step cuda-tree needs require or compile-arch: a tree is trusted by a check, never by the cache's hit"
	read -r -a reqs <<<"${GPUGATE_REQUIRE:-}"
	read -r -a excls <<<"${GPUGATE_EXCLUDE:-}"
	read -r -a hdrs <<<"${GPUGATE_HEADERS:-}"
	[ ${#hdrs[@]} -eq 0 ] || [ -n "${GPUGATE_COMPILE_ARCH:-}" ] || fail "step cuda-tree: headers are compiled by the tree's NVRTC: give compile-arch too"
	[ $((${#reqs[@]} + ${#excls[@]})) -eq 0 ] || cachecheck=$(program cachecheck)
	[ -z "${GPUGATE_COMPILE_ARCH:-}" ] || smoke=$(program smoke)
	check() {
		local ok=0 args=(-tree "$tree")
		if [ $((${#reqs[@]} + ${#excls[@]})) -gt 0 ]; then
			for r in "${reqs[@]}"; do args+=(-require "$r"); done
			for x in "${excls[@]}"; do args+=(-exclude "$x"); done
			"$cachecheck" "${args[@]}" || ok=1
		fi
		if [ -n "${GPUGATE_COMPILE_ARCH:-}" ]; then
			local sargs=(-compile-only "$tree/lib64" -arch "$GPUGATE_COMPILE_ARCH")
			if [ ${#hdrs[@]} -gt 0 ]; then
				sargs+=(-include "$tree/include")
				for h in "${hdrs[@]}"; do sargs+=(-header "$h"); done
			fi
			"$smoke" "${sargs[@]}" || ok=1
		fi
		return $ok
	}
	install_tree() {
		echo "gpugate: installing $tree with $GPUGATE_INSTALL_SCRIPT"
		# The script is the repository's (in the GPU workflow, the pull
		# request's): it gets no token.
		(cd "$ws" && env -u GITHUB_TOKEN -u RUNPOD_API_KEY "$(rel "$GPUGATE_INSTALL_SCRIPT")" "$tree") || fail "step cuda-tree: $GPUGATE_INSTALL_SCRIPT failed to install $tree"
		check || fail "step cuda-tree: the newly installed $tree failed its check; it is not used or published"
	}
	if [ "${GPUGATE_CACHE_HIT:-}" = true ]; then
		echo "gpugate: $tree: restored from the cache; checking it before use"
		if check; then
			source=restored
		elif [ "${GPUGATE_PUBLISHER:-false}" = true ]; then
			fail "step cuda-tree: the published $tree fails its check: bump the manual version in its cache key so readers stop restoring it"
		else
			echo "::warning::gpugate: the restored $tree failed its check: reinstalling it"
			rm -rf -- "$tree"
			install_tree
			source=reinstalled
		fi
	else
		echo "gpugate: $tree: cache miss; installing"
		install_tree
		source=installed
	fi
	echo "tree_source=$source" >>"${GITHUB_OUTPUT:-/dev/null}"
	echo "CUDA tree $tree: $source" >>"${GITHUB_STEP_SUMMARY:-/dev/null}"
	echo "gpugate: $tree: $source"
	exit 0
	;;
*)
	fail "unknown step \"${GPUGATE_STEP}\": want classify, authorize, reuse, provision, watch, cleanup, publish, reap, partition-check, partition-select, cache-check, cost-report, local-relay, recover, install, free-disk or cuda-tree"
	;;
esac

# The label that marks a PR validated on a maintainer's own GPU.
case "${GPUGATE_STEP:-classify}" in
authorize | publish | provision | local-relay)
	[ -z "${GPUGATE_LOCAL_LABEL:-}" ] || args+=(-local-label "$GPUGATE_LOCAL_LABEL")
	;;
esac

# Installed or built, then exec'd, so that this step's process is the
# program: the runner cancels a step by signalling that one process
# (SIGINT, then SIGTERM), and provision must then delete a pod it created.
# `go run` would keep the signal from the program.
cmd=$(program "$prog")
exec "$cmd" "${args[@]}"
