#!/usr/bin/env bash
# The pytest suite sharded over this machine's GPUs: shard K of N runs on GPU K-1 alone,
# all N at once, each with its share of the cores as xdist workers (WORKERS=n to choose).
#
#   bash scripts/shard_suite.sh N [PYTEST ARGS...]     e.g. 4 prototypes -m gpu
#
# Each shard is pinned to its own share of the cores (taskset, where the machine has it):
# a shard is one runner's worth, a GPU and its cores, as on a matrix of N machines.
# Each shard's output goes to $OUT/shard-K.txt (default: ./shard-out); the exit code is
# the worst shard's. Durations: pass --portkit-durations FILE in the pytest args to
# balance by them; every shard reads FILE, and writes its own items to FILE.K (merge
# them with `jq -s add`), so the shards never write one file at once.
set -uo pipefail
N=${1:?usage: bash scripts/shard_suite.sh N [PYTEST ARGS...]}
shift
OUT=${OUT:-$PWD/shard-out}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
cores=$(nproc)
workers=${WORKERS:-$((cores / N > 0 ? cores / N : 1))}
args=()
durations=""
while (($#)); do
  if [ "$1" = --portkit-durations ]; then durations=$2; shift 2; continue; fi
  args+=("$1"); shift
done
pids=()
for k in $(seq 1 "$N"); do
  extra=()
  if [ -n "$durations" ]; then
    [ -f "$durations" ] && cp "$durations" "$durations.$k"
    extra=(--portkit-durations "$durations.$k")
  fi
  pin=()
  if command -v taskset > /dev/null && [ "$cores" -ge "$N" ]; then
    share=$((cores / N))
    pin=(taskset -c "$(((k - 1) * share))-$((k * share - 1))")
  fi
  CUDA_VISIBLE_DEVICES=$((k - 1)) "${pin[@]}" "$PY" -m pytest -n "$workers" -p no:cacheprovider "${args[@]}" \
    --portkit-shard "$k/$N" "${extra[@]}" > "$OUT/shard-$k.txt" 2>&1 &
  pids+=($!)
done
worst=0
for k in $(seq 1 "$N"); do
  wait "${pids[$((k - 1))]}"
  rc=$?
  echo "shard $k/$N: exit $rc, $(grep -v '^\s*$' "$OUT/shard-$k.txt" | tail -n 1)"
  [ "$rc" -gt "$worst" ] && worst=$rc
done
exit "$worst"
