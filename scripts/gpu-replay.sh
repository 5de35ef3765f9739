#!/usr/bin/env bash
# Issue 13, launch replay on a GPU machine (about 3 minutes): build the compiled replayer
# (timed, full log), run tests/launch (CPU and gpu-marked), the launch benchmark (with a
# cProfile of the twin), tests/torch_op and the generated suite's GPU tier. Logs under $OUT.
#
#   OUT=/some/folder bash scripts/gpu-replay.sh
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
timeout 120 "$PY" scripts/replay_parts.py > "$OUT/replay_parts.txt" 2>&1
cat "$OUT/replay_parts.txt"
# The registered op's tests (opcheck, compile, CUDA graphs: replayed calls inside) and the
# generated suite's GPU tier, which must be untouched by replay (the checker does not use it).
timeout 150 "$PY" -m pytest -p portkit.pytest_plugin -n 4 -q -rfE -p no:cacheprovider tests/torch_op \
  > "$OUT/pytest-torch-op.txt" 2>&1
tail -n 3 "$OUT/pytest-torch-op.txt"
timeout 200 "$PY" -m pytest -p portkit.pytest_plugin -n 4 -q -rfE -p no:cacheprovider prototypes -m gpu \
  > "$OUT/pytest-prototypes-gpu.txt" 2>&1
tail -n 3 "$OUT/pytest-prototypes-gpu.txt"
# Only a few files come back from $OUT: keep the logs in one archive.
(cd "$OUT" && tar -czf replay-logs.tgz --remove-files ./*.txt ./*.json 2>/dev/null; true)
