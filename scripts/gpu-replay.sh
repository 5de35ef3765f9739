#!/usr/bin/env bash
# Issue 13, launch replay on a GPU machine: build the compiled replayer (timed, full log),
# run tests/launch (CPU and gpu-marked) and the launch benchmark. Logs under $OUT.
#
#   source-free: OUT=/some/folder bash scripts/gpu-replay.sh
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-env.sh
{
  start=$SECONDS
  "$PY" - <<'PY'
from torch.utils import cpp_extension
from portkit.launch.replay.native import SOURCE
cpp_extension.load("portkit_replay_buildcheck", [str(SOURCE)], extra_cflags=["-O2"], with_cuda=True, verbose=True)
from portkit.launch.replay.native import native_replayer, unavailable_reason
print("replayer:", type(native_replayer()).__name__, "| reason:", unavailable_reason())
PY
  echo "build+load seconds: $((SECONDS - start))"
} > "$OUT/replay-build.txt" 2>&1
tail -n 25 "$OUT/replay-build.txt"
timeout 240 "$PY" -m pytest -p portkit.pytest_plugin -n 4 -q -rfE -p no:cacheprovider tests/launch \
  > "$OUT/pytest-launch.txt" 2>&1
tail -n 25 "$OUT/pytest-launch.txt"
timeout 200 "$PY" scripts/bench_launch.py --json "$OUT/bench_launch.json" --profile "$OUT/profile.txt" ${BENCH_ARGS:-} \
  > "$OUT/bench_launch.txt" 2>&1
cat "$OUT/bench_launch.txt"
