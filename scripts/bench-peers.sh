#!/usr/bin/env bash
# Runs gpugate's hot paths beside the tools an adopter would use instead,
# on the same input in one run, and prints each pair's figures and ratio:
#   cachetrust.Key, KeyDir    vs  find | xargs sha256sum
#   changepolicy.Classify     vs  picomatch (npm; dorny/paths-filter's matcher)
#   partition check           vs  jq over the same nextest listing, and
#                                 the check command from files at 200k and 2M
#   partition checkpoint      vs  GNU tar -x of the same checkpoint
# Needs Go, node and npm (picomatch is installed into a temporary
# directory from the npm registry), jq and GNU tar. Takes a few minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
metric() { # metric NAME < benchmark output: the value before NAME on the first line that has it
	awk -v m="$1" '{ for (i = 2; i <= NF; i++) if ($i == m) { print $(i-1); exit } }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

echo "== cachetrust.Key and KeyDir vs sha256sum (50,000 files, 976 MiB)"
# One GOMAXPROCS per run: -cpu 1,2 reports the second value wrong under b.Loop.
# cpu-MB/s is MB per CPU-second of the whole process, the figure that holds
# on contended cores; MB/s is wall time.
floors=$(GOMAXPROCS=1 go test ./cachetrust -run '^$' -bench '^(BenchmarkSHA256Floor|BenchmarkReadFloor)$' -benchtime 3x 2>&1 || true)
# The floors are CPU time too, as the shares below divide CPU figures.
floor=$(grep '^BenchmarkSHA256Floor' <<<"$floors" | metric cpu-MB/s || true)
for procs in 1 2; do
	out=$(GOMAXPROCS=$procs go test ./cachetrust -run '^$' -bench '^BenchmarkKey(Dir)?$/^files=50000$' -benchtime 3x 2>&1)
	key=$(grep '^BenchmarkKey/' <<<"$out" || true)
	dir=$(grep '^BenchmarkKeyDir/' <<<"$out" || true)
	peer=$(metric sha256sum-MB/s <<<"$key")
	for name in Key KeyDir; do
		line=$key
		[ "$name" = Key ] || line=$dir
		wall=$(metric MB/s <<<"$line")
		cpu=$(metric cpu-MB/s <<<"$line")
		share=""
		[ -z "$floor" ] || share="   per core $(ratio "$cpu" "$floor") of the SHA-256 floor"
		printf 'GOMAXPROCS=%s  %-6s %s MB/s (%s cpu-MB/s)   %s/sha256sum %s%s\n' \
			"$procs" "$name" "$wall" "$cpu" "$name" "$(ratio "$wall" "$peer")" "$share"
	done
	echo "GOMAXPROCS=$procs  sha256sum (find | xargs -P 2) ${peer} MB/s"
done
readfloor=$(grep '^BenchmarkReadFloor' <<<"$floors" | metric cpu-MB/s || true)
openfloor=$(grep '^BenchmarkReadFloor' <<<"$floors" | metric open+close-cpu-ns/file || true)
[ -z "$floor" ] || echo "SHA-256 floor on one core: ${floor} cpu-MB/s"
if [ -n "$floor" ] && [ -n "$readfloor" ]; then
	# Hashing and reading on one core add up: no hasher of these files (20
	# KiB each) can reach more than this on one core.
	bound=$(awk -v f="$floor" -v r="$readfloor" 'BEGIN { printf "%.2f", 1 / (1 / f + 1 / r) }')
	echo "openat+read+close alone: ${readfloor} cpu-MB/s ($(awk -v r="$readfloor" 'BEGIN { printf "%.0f", 20480 / r * 1000 }') CPU-ns/file)   bound on one core ${bound} cpu-MB/s = $(ratio "$bound" "$floor") of the SHA-256 floor"
	# Opening alone, before a byte is read: the bound even for a reader
	# whose reads cost nothing.
	[ -z "$openfloor" ] || echo "openat+close alone: ${openfloor} CPU-ns/file   bound even with free reads $(awk -v f="$floor" -v o="$openfloor" 'BEGIN { b = 20480 / (20480 / f + o / 1000); printf "%.2f cpu-MB/s = %.2f", b, b / f }') of the SHA-256 floor"
fi

echo "== changepolicy.Classify vs picomatch 2 (100,000 paths x 204 globs)"
GPUGATE_PEER_CORPUS="$tmp" go test ./changepolicy -run '^TestWritePeerCorpus$' -count=1 >/dev/null
out=$(go test ./changepolicy -run '^$' -bench '^BenchmarkClassify$/^paths=100000$/' -benchtime 5x 2>&1)
ours=$(metric ns/op <<<"$out")
ours_per=$(awk -v t="$ours" 'BEGIN { printf "%.0f", t / 100000 }')
(cd "$tmp" && npm install --silent --no-audit --no-fund picomatch@2 >/dev/null 2>&1)
# The same work as Classify's index: each path against every set of the
# policy (a set holds a path when one of its patterns matches and none of
# its ! patterns does: this package's rule, where dorny/paths-filter ORs
# a ! pattern in), counted per set, and checked against Classify's counts.
# picomatch 2 is the major version dorny/paths-filter depends on. One
# untimed run warms the JIT; the figure is the mean of five, as Go's ns/op
# is.
cat >"$tmp/match.js" <<'JS'
const pm = require('picomatch');
const sets = require('./sets.json').map(s => ({
  name: s.name,
  pos: s.globs.filter(g => !g.startsWith('!')).map(g => pm(g, {dot: true})),
  neg: s.globs.filter(g => g.startsWith('!')).map(g => pm(g.slice(1), {dot: true})),
}));
const paths = require('./paths.json'), want = require('./want.json');
function run() {
  const counts = Object.fromEntries(sets.map(s => [s.name, 0]));
  for (const p of paths) for (const s of sets) if (s.pos.some(m => m(p)) && !s.neg.some(m => m(p))) counts[s.name]++;
  return counts;
}
let counts = run(), total = 0n;
for (let i = 0; i < 5; i++) {
  const t = process.hrtime.bigint();
  counts = run();
  total += process.hrtime.bigint() - t;
}
const differ = sets.filter(s => counts[s.name] !== want[s.name]).map(s => `${s.name}: picomatch ${counts[s.name]}, Classify ${want[s.name]}`);
console.log(Math.round(Number(total) / 5 / paths.length), differ.length ? 'DIFFER ' + differ.join('; ') : 'agree');
JS
read -r peer_per agreement < <(cd "$tmp" && node match.js)
echo "Classify ${ours_per} ns/path   picomatch ${peer_per} ns/path   picomatch/Classify $(ratio "$peer_per" "$ours_per")   set counts: $agreement"

echo "== partition check vs jq (200,000 tests), and the command from files (200,000 and 2,000,000)"
GPUGATE_PEER_CORPUS="$tmp" go test ./partition -run '^TestWritePeerListing$' -count=1 >/dev/null
out=$(go test ./partition -run '^$' -bench '^BenchmarkParseAndCheck$/^format=nextest$/^tests=200000$' -benchtime 3x 2>&1)
ours=$(awk -v t="$(metric ns/op <<<"$out")" 'BEGIN { printf "%.0f", t / 1e6 }')
# jq's side of the same check: every listed test against the partition's
# lines (sorted, then compared), as a shell pipeline would do it.
start=$(date +%s%N)
jq -r '."rust-suites" | to_entries[] | .key as $b | .value.testcases | keys[] | "\($b)\t\(.)"' "$tmp/listing.json" | LC_ALL=C sort >"$tmp/listed"
grep -v '^#' "$tmp/partition.tsv" | cut -f1,2 | LC_ALL=C sort >"$tmp/partitioned"
LC_ALL=C comm -3 "$tmp/listed" "$tmp/partitioned" >/dev/null
peer=$((($(date +%s%N) - start) / 1000000))
echo "partition parse+check ${ours} ms   jq+sort+comm ${peer} ms   jq/partition $(ratio "$peer" "$ours")"
# The check command's whole path (Config.AuditFiles: the partition file
# read and validated, the listing streamed from its file, Check, and for
# go test -json the split-test scan), each in a fresh process, so that its
# peak memory is its own; two million tests write 1.5 GB of listings.
out=$(go test ./partition -run '^$' -bench '^BenchmarkParseAndCheckPeak$/^format=(nextest|go)$/^tests=(200000|2000000)$/^from=file$' -benchtime 1x -timeout 30m 2>&1)
for format in nextest go; do
	for n in 200000 2000000; do
		line=$(grep "^BenchmarkParseAndCheckPeak/format=$format/tests=$n/from=file" <<<"$out" || true)
		ms=$(awk -v t="$(metric check-ns <<<"$line")" 'BEGIN { printf "%.0f", t / 1e6 }')
		printf 'partition check from files, %-7s %7d tests: %6s ms   peak RSS %s MiB\n' "$format" "$n" "$ms" "$(metric peak-RSS-MiB <<<"$line")"
	done
done

echo "== checkpoint restore vs GNU tar -x (100,000 files of 4 KiB, on tmpfs where there is one)"
dir=/dev/shm
[ -d "$dir" ] && [ -w "$dir" ] || dir="$tmp"
out=$(TMPDIR="$dir" go test ./compileplan -run '^$' -bench '^BenchmarkRestoreCheckpointVsTar$/^files=100000$' -benchtime 3x 2>&1)
echo "restore $(metric restore-ms <<<"$out") ms   tar -x $(metric tar-ms <<<"$out") ms   restore/tar $(metric restore/tar <<<"$out") (CPU $(metric restore/tar-cpu <<<"$out"))"
