#!/usr/bin/env bash
# scripts/ci/spark-test.sh — the repository's bounded Spark test entry point
# (an example to copy). spark-test.yml runs it after the controller admitted
# the reservation and the managed runner verified the lease and preflight.
#
#   SPARK_TEST_SUITE=smoke|performance scripts/ci/spark-test.sh single|pair
#
# Deterministic, bounded and topology-aware:
#   - prints toolchain and source revisions;
#   - uses the controller-provided work and cache directories;
#   - runs correctness before any performance measurement;
#   - is bounded: the whole suite has its target as its limit
#     (SPARK_SUITE_MINUTES; default 30 for smoke, 60 for performance), and
#     a command still running at the limit is stopped and fails the lane;
#   - serializes writes to the shared build target, waiting a bounded time
#     for the lock (SPARK_LOCK_WAIT_SECONDS, default 1800);
#   - never downloads a model: with the managed model cache
#     (SPARK_MODEL_CACHE) its commands read models from there, offline;
#   - emits a compact receipt; large logs stay in the work directory;
#   - cleans its disposable work directory on success;
#   - never stops services or processes it does not own.
# A pair topology exits with an error until a real distributed assertion is
# configured (SPARK_DISTRIBUTED_CMD): it never consumes two nodes to run
# independent commands. Submit two one-node reservations for that.
set -euo pipefail

topology="${1:-}"
suite="${SPARK_TEST_SUITE:-smoke}"
work="${SPARK_WORK_DIR:-${RUNNER_TEMP:-/tmp}/spark-work}"
cache="${SPARK_CACHE_DIR:-${HOME}/.cache/spark}"
# The repository's commands; the defaults are Butter's CUDA smoke and its
# bounded serving benchmark.
smoke_cmd="${SPARK_SMOKE_CMD:-cargo test --release -p wh-butter-cuda --test cuda_smoke}"
perf_cmd="${SPARK_PERF_CMD:-cargo run --release -p wh-butter-bench -- --prompt-tokens 512 --decode-tokens 32 --warmup 1 --runs 2}"
distributed_cmd="${SPARK_DISTRIBUTED_CMD:-}"
lock_wait="${SPARK_LOCK_WAIT_SECONDS:-1800}"
case "$suite" in performance) default_minutes=60 ;; *) default_minutes=30 ;; esac
minutes="${SPARK_SUITE_MINUTES:-$default_minutes}"
models="${SPARK_MODEL_CACHE:-}"

die() { echo "spark-test: $*" >&2; exit 2; }

case "$topology" in
single) ;;
pair)
	[[ -n "$distributed_cmd" ]] || die "pair topology refused: no distributed assertion is configured (set SPARK_DISTRIBUTED_CMD to a test that exercises placement or collectives across both hosts; for two independent commands submit two one-node reservations)"
	;;
*) die "topology \"$topology\": want single or pair" ;;
esac
case "$suite" in
smoke | performance) ;;
*) die "SPARK_TEST_SUITE \"$suite\": want smoke or performance" ;;
esac
[[ "$lock_wait" =~ ^[0-9]+$ ]] || die "SPARK_LOCK_WAIT_SECONDS \"$lock_wait\": want a whole number of seconds"
[[ "$minutes" =~ ^[1-9][0-9]*$ ]] || die "SPARK_SUITE_MINUTES \"$minutes\": want a whole number of minutes, at least 1"
if [[ -n "$models" ]]; then
	[[ -d "$models" ]] || die "SPARK_MODEL_CACHE \"$models\" is not a directory: the managed model cache must exist before the lane runs"
	# Models come from the managed cache, never from the network: a model
	# missing there fails the lane instead of being downloaded.
	export HF_HUB_CACHE="$models" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
	echo "spark-test: models from the managed cache $models (offline)"
fi

mkdir -p "$work" "$cache"
echo "spark-test: topology=$topology suite=$suite"
echo "spark-test: source $(git rev-parse HEAD 2>/dev/null || echo unknown)"
for tool in nvcc rustc cargo go; do
	if command -v "$tool" >/dev/null; then
		echo "spark-test: $tool $("$tool" --version 2>/dev/null | tail -n1)"
	fi
done

started=$(date +%s)
deadline=$((started + minutes * 60))
# Writes to the shared build target are serialized across reservations.
exec 9>"$cache/build.lock"
# failed NAME FIELDS: the receipt of a lane that failed at NAME, with more
# JSON fields (each ,"key":"value"), and the lane's exit status.
failed() {
	echo "{\"suite\":\"$suite\",\"topology\":\"$topology\",\"failed\":\"$1\"$2}"
	exit 1
}
run() { # name command...
	local name="$1"
	shift
	echo "spark-test: $name: $*"
	if ! flock -w "$lock_wait" 9; then
		failed "$name" ",\"reason\":\"the shared build target stayed locked for ${lock_wait} s\""
	fi
	local left=$((deadline - $(date +%s)))
	if ((left <= 0)); then
		failed "$name" ",\"reason\":\"the suite's ${minutes}-minute limit was spent before it started\""
	fi
	local code=0
	timeout --kill-after=30 "$left" bash -c "$*" >"$work/$name.log" 2>&1 || code=$?
	if ((code != 0)); then
		flock -u 9
		tail -n 50 "$work/$name.log" >&2
		local reason=""
		if ((code == 124 || code == 137)); then
			reason=",\"reason\":\"stopped at the suite's ${minutes}-minute limit\""
		fi
		failed "$name" ",\"log\":\"$work/$name.log\"$reason"
	fi
	flock -u 9
}

run correctness "$smoke_cmd"
if [[ "$topology" == pair ]]; then
	run distributed "$distributed_cmd"
fi
if [[ "$suite" == performance ]]; then
	run performance "$perf_cmd"
fi

echo "{\"suite\":\"$suite\",\"topology\":\"$topology\",\"passed\":true,\"seconds\":$(($(date +%s) - started))}"
rm -rf "$work"
