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
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if compgen -G ".whl/*.whl" >/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/portkit-site .whl/*.whl
  export PYTHONPATH="/tmp/portkit-site:$PYTHONPATH"
fi
# A fresh twin cache, so the run also measures cold compiles.
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-/tmp/portkit-gpu-cache}

{
  date -u +"date: %Y-%m-%dT%H:%MZ"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | sed 's/^/gpu: /'
  "$PY" - <<'PY'
import platform, numpy, numba, torch, click, rich, pytest
from importlib.metadata import version
print("python:", platform.python_version())
for name in ("torch", "numba", "numba-cuda", "numpy", "cuda-core", "cuda-bindings", "click", "rich", "pytest"):
    print(f"{name}: {version(name)}")
print("torch cuda:", torch.version.cuda, "device:", torch.cuda.get_device_name(0))
PY
} | tee "$OUT/versions.txt"

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
