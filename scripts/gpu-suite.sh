#!/usr/bin/env bash
# The whole portkit suite on a GPU machine, with that machine's own Python.
#
#   scripts/gpu-suite.sh            # logs go to $OUT (default: ./gpu-out)
#
# The machine needs torch with CUDA, numba-cuda, cuda-core, click, rich and pytest.
# NumPy must be < 2.5 for numba-cuda 0.30 (np.row_stack is gone in 2.5): wheels found
# in ./.whl (see ../shared/gpu/fetch-wheels) are installed first into a private folder.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-env.sh

status=0
# `portkit check` from a cold process, timed: one of the figures docs/benchmarks.md records.
/usr/bin/time -f "wall seconds: %e" "$PY" -m portkit.cli check sigmoid > "$OUT/check-sigmoid.txt" 2>&1 || status=1
tail -n 3 "$OUT/check-sigmoid.txt"
"$PY" -m portkit.cli check --all > "$OUT/check-all.txt" 2>&1 || status=1
tail -n 40 "$OUT/check-all.txt"
# Load the plugin by name only where portkit is not pip-installed (there its entry point does).
plugin=(-p portkit.pytest_plugin)
if "$PY" -c "import sys, importlib.metadata as m; sys.exit(not any(e.name == 'portkit' for e in m.entry_points(group='pytest11')))"; then
  plugin=()
fi
"$PY" -m pytest "${plugin[@]}" -q -rfs -p no:cacheprovider --junitxml="$OUT/junit.xml" \
  tests prototypes > "$OUT/pytest.txt" 2>&1 || status=1
tail -n 25 "$OUT/pytest.txt"
if [ -f scripts/benchmark.py ]; then
  "$PY" scripts/benchmark.py > "$OUT/benchmark.md" 2>&1 || status=1
  cat "$OUT/benchmark.md"
fi
exit $status
