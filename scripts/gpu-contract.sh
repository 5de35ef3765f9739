python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl; export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
# Issue 11 on a GPU machine: the dtype contract and the new ops (histogram, layernorm,
# matmul, cumsum, rmsnorm) on numba-cuda and the twins. Run from the repository root:
#
#   OUT=/some/folder bash scripts/gpu-contract.sh
#
# Files under $OUT (7): check-all.txt, pytest-gpu.txt, diff-<op>.txt for the five new
# ops. A summary table is printed last. Each step has a timeout (exit 124 in the table)
# so the whole stays under 6 minutes: 120 + 150 + 5 x 15 seconds.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-/tmp/portkit-contract-cache}
PY=python3
NEW_OPS="histogram layernorm matmul cumsum rmsnorm"
declare -A result

timeout 120 "$PY" -m portkit.cli check --all > "$OUT/check-all.txt" 2>&1
result[check-all]="exit $? ($(tail -n 1 "$OUT/check-all.txt"))"

plugin=(-p portkit.pytest_plugin)
if "$PY" -c "import sys, importlib.metadata as m; sys.exit(not any(e.name == 'portkit' for e in m.entry_points(group='pytest11')))"; then
  plugin=()
fi
# Generated tests of the new ops, the wrong twins of the new ops (one portkit check
# subprocess each) and numba-cuda's bfloat16 arrays against the simulator.
timeout 150 "$PY" -m pytest "${plugin[@]}" -q -rfsx -p no:cacheprovider -m gpu \
  -k "histogram or layernorm or matmul or cumsum or rmsnorm or half_precision" \
  prototypes tests/check/test_wrong_twins.py tests/backends/test_half_precision_gpu.py \
  > "$OUT/pytest-gpu.txt" 2>&1
result[pytest-gpu]="exit $? ($(tail -n 1 "$OUT/pytest-gpu.txt"))"

for op in $NEW_OPS; do
  timeout 15 "$PY" -m portkit.cli diff "$op" > "$OUT/diff-$op.txt" 2>&1
  result[diff-$op]="exit $? ($(tail -n 1 "$OUT/diff-$op.txt"))"
done

grep -E "^(FAIL|ERROR)" "$OUT/check-all.txt" | head -n 20
grep -E "^(FAILED|ERROR)" "$OUT/pytest-gpu.txt" | head -n 20
echo
echo "| step | result |"
echo "|---|---|"
for step in check-all pytest-gpu $(for op in $NEW_OPS; do echo "diff-$op"; done); do
  echo "| $step | ${result[$step]} |"
done
