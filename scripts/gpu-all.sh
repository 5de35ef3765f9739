#!/usr/bin/env bash
# Every GPU verification in two device calls, each under 10 minutes, from the repo root:
#
#   OUT=/some/folder bash scripts/gpu-all.sh timing       # alone on the GPU: what is timed
#   OUT=/some/folder bash scripts/gpu-all.sh correctness  # in parallel: what is checked
#
# timing:      scripts/gpu-bench.sh (portkit bench), scripts/bench_launch.py (host cost per
#              call), scripts/gpu-scale.sh (cold start-up, engines vs GPU, GPU tier wall time)
# correctness: the whole pytest suite (-n 8), scripts/gpu-trust.sh, gpu-contract.sh,
#              gpu-production.sh, gpu-15-twincpu.sh, staggered so their installs do not race
# Each part's files are packed into $OUT/<part>.tgz (the device tool returns 8 files).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
WORK=$(mktemp -d /tmp/gpu-all.XXXXXX)
part() {  # name seconds command...: run a part with its own OUT and log, then pack it
  local name=$1 limit=$2; shift 2
  mkdir -p "$WORK/$name"
  OUT="$WORK/$name" timeout "$limit" "$@" > "$WORK/$name/log.txt" 2>&1
  echo "$name: exit $?" >> "$WORK/status.txt"
  tar czf "$OUT/$name.tgz" -C "$WORK" "$name"
}
case "${1:-}" in
  timing)
    part bench 230 bash scripts/gpu-bench.sh
    part launch 100 bash -c 'python3 scripts/bench_launch.py --json "$OUT/bench_launch.json" > "$OUT/bench_launch.txt" 2>&1'
    part scale 240 bash scripts/gpu-scale.sh
    ;;
  correctness)
    part suite 480 bash -c 'python3 -m pytest -p portkit.pytest_plugin -q -rfE -p no:cacheprovider -n 8 tests prototypes > "$OUT/pytest.txt" 2>&1' &
    sleep 20; part trust 420 bash scripts/gpu-trust.sh &
    sleep 20; part contract 400 bash scripts/gpu-contract.sh &
    sleep 20; part production 400 bash scripts/gpu-production.sh &
    sleep 20; part twincpu 380 bash scripts/gpu-15-twincpu.sh &
    wait
    ;;
  *) echo "usage: gpu-all.sh timing|correctness" >&2; exit 2 ;;
esac
cat "$WORK/status.txt"
for f in "$WORK"/*/summary.txt; do [ -f "$f" ] && { echo "== $f"; tail -n 30 "$f"; }; done
[ -f "$WORK/suite/pytest.txt" ] && tail -n 3 "$WORK/suite/pytest.txt"
[ -f "$WORK/bench/log.txt" ] && tail -n 40 "$WORK/bench/log.txt"
[ -f "$WORK/launch/bench_launch.txt" ] && cat "$WORK/launch/bench_launch.txt"
exit 0
