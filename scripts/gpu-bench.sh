#!/usr/bin/env bash
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl; export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
# portkit bench on a GPU machine (issue 12): the example ops' twins and prototypes timed
# against torch, checked at the timed shapes, plus the GPU tests of the benchmark.
#
#   OUT=/tmp/out scripts/gpu-bench.sh      # from the repository root; under 6 minutes
#
# Writes to $OUT: check.txt (portkit check, numba + twin), bench.txt (the table),
# bench.json (the report, a baseline for --compare), bench.png (the chart), pytest.txt
# (tests/bench and the plugin's bench items against bench.json), ncu.txt (memory
# throughput of both softmax twins at 1024x32768 and 4096x4096), and the table last on
# stdout. On the H100 it took about 160 s (2026-11-23).
set -uo pipefail
OUT=${OUT:-./gpu-out}
mkdir -p "$OUT"
status=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader

python3 -m portkit.cli check sigmoid vector_add elementwise_mul softmax softmax_warp \
  --backend numba --backend twin --no-compile > "$OUT/check.txt" 2>&1 || status=1
tail -n 1 "$OUT/check.txt"

python3 -m portkit.cli bench --all --reps 30 --save "$OUT/bench.json" --plot "$OUT/bench.png" \
  > "$OUT/bench.txt" 2>&1 || status=1

# Load the plugin by name only where portkit is not pip-installed (there its entry point does).
plugin=(-p portkit.pytest_plugin)
if python3 -c "import sys, importlib.metadata as m; sys.exit(not any(e.name == 'portkit' for e in m.entry_points(group='pytest11')))"; then
  plugin=()
fi
python3 -m pytest "${plugin[@]}" -q -rfs -p no:cacheprovider tests/bench > "$OUT/pytest.txt" 2>&1 || status=1
python3 -m pytest "${plugin[@]}" -q -rfs -p no:cacheprovider prototypes -m bench \
  --portkit-bench-baseline "$OUT/bench.json" --portkit-bench-threshold 0.25 >> "$OUT/pytest.txt" 2>&1 || status=1
tail -n 3 "$OUT/pytest.txt"

if command -v ncu > /dev/null && [ -f scripts/ncu_softmax.py ]; then
  timeout 120 ncu --kernel-name regex:softmax --launch-count 16 \
    --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread \
    python3 scripts/ncu_softmax.py > "$OUT/ncu.txt" 2>&1 || true
  grep -E "softmax|duration|throughput|warps_active|registers" "$OUT/ncu.txt" | head -n 40
fi

cat "$OUT/bench.txt"
exit $status
