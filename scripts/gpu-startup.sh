#!/usr/bin/env bash
# Issue 14, start-up on a GPU machine: `portkit check sigmoid` from a fresh process with an
# empty cache, with the prototype cache off (PORTKIT_PROTOTYPE_CACHE=0: every numba kernel
# compiled, the state before the cache; twins cached), and with a warm prototype cache,
# against the floor (import torch + numba.cuda + a CUDA context). Then the GPU tiers alone
# (torch, numba, twin) warm, -v lines saying where each kernel and the lint row came from,
# and the prototype-cache and lint-cache tests with the GPU test included. Summary: $OUT/startup.txt.
#
#   OUT=/some/folder scripts/gpu-startup.sh      # about 4 minutes
#   BEFORE=/path/to/older/portkit OUT=... scripts/gpu-startup.sh   # + that tree, same rounds
set -uo pipefail
cd "$(dirname "$0")/.."
export XDG_CACHE_HOME=/tmp/portkit-startup-cache-$$  # empty: the first run is cold
source scripts/gpu-env.sh
summary="$OUT/startup.txt"
: > "$summary"
row() { printf '%-62s %s\n' "$1" "$2" | tee -a "$summary"; }

# seconds LABEL-FILE CMD...: run CMD once, append its wall time to $OUT/LABEL-FILE.times
seconds() {
  local file=$1; shift
  local start end
  start=$(date +%s.%N)
  "$@" > "$OUT/$file.last.txt" 2>&1
  local status=$?
  end=$(date +%s.%N)
  "$PY" -c "print(f'{$end - $start:.2f}')" >> "$OUT/$file.times"
  return $status
}
median() { "$PY" -c "import statistics,sys; v=[float(x) for x in open(sys.argv[1])]; print(f'median {statistics.median(v):.2f} s of {len(v)} ({\" \".join(f\"{x:.2f}\" for x in v)})')" "$OUT/$1.times"; }

floor=(-c "import torch, numba.cuda; torch.zeros(1, device='cuda'); torch.cuda.synchronize()")
check=(-m portkit.cli check sigmoid)

# 1. Empty cache (twins and prototypes): one cold run fills both.
seconds check-empty "$PY" "${check[@]}"
row "portkit check sigmoid, empty cache (exit $?)" "$(median check-empty)"
# The GPU image sets PYTHONDONTWRITEBYTECODE=1 and ships torch without __pycache__, so
# every process compiles torch's and numba's Python to bytecode again (1,400 modules,
# 5.5 s of a check in cProfile). `pyc` runs allow a bytecode cache outside the tree.
pyc=(env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=/tmp/portkit-pycache)
"${pyc[@]}" "$PY" "${check[@]}" > /dev/null 2>&1  # fills it
# 2. Interleaved rounds, so drift hits all alike: floor, cache off, cache warm.
for _ in 1 2 3; do
  seconds floor "$PY" "${floor[@]}"
  PORTKIT_PROTOTYPE_CACHE=0 seconds check-nocache "$PY" "${check[@]}"
  seconds check-warm "$PY" "${check[@]}"
  seconds check-gpu-warm "$PY" "${check[@]}" --backend torch --backend numba --backend twin
  seconds floor-pyc "${pyc[@]}" "$PY" "${floor[@]}"
  seconds check-warm-pyc "${pyc[@]}" "$PY" "${check[@]}"
  if [ -n "${BEFORE:-}" ]; then
    (cd "$BEFORE" && PYTHONPATH="/tmp/portkit-site:$BEFORE" seconds check-before "$PY" "${check[@]}")
  fi
done
row "floor: import torch + numba.cuda + CUDA context" "$(median floor)"
row "portkit check sigmoid, prototype cache off (twins cached)" "$(median check-nocache)"
row "portkit check sigmoid, prototype cache warm" "$(median check-warm)"
row "portkit check sigmoid --backend torch,numba,twin, warm" "$(median check-gpu-warm)"
row "floor, bytecode cached (PYTHONPYCACHEPREFIX)" "$(median floor-pyc)"
row "portkit check sigmoid, prototype cache warm, bytecode cached" "$(median check-warm-pyc)"
if [ -n "${BEFORE:-}" ]; then
  row "portkit check sigmoid, tree $BEFORE (twins cached)" "$(median check-before)"
fi
cp "$OUT/check-warm.last.txt" "$OUT/check-sigmoid-warm.txt"
cp "$OUT/check-nocache.last.txt" "$OUT/check-sigmoid-nocache.txt"

# 3. Where each kernel came from (-v), and where the time of a warm run goes.
"$PY" "${check[@]}" -v > "$OUT/check-sigmoid-warm-v.txt" 2>&1
grep -E "^numba |compile sm_90| lint " "$OUT/check-sigmoid-warm-v.txt" | tee -a "$summary"
"$PY" -X importtime "${check[@]}" 2> "$OUT/importtime-check.txt" > /dev/null
"$PY" -m cProfile -s cumulative "${check[@]}" > "$OUT/profile-check-warm.txt" 2>&1

# 4. The prototype-cache tests, the GPU one included. The plugin registers the gpu
# marker; load it by name only where no entry point does (portkit not pip-installed).
plugin=(-p portkit.pytest_plugin)
if "$PY" -c "import sys, importlib.metadata as m; sys.exit(not any(e.name == 'portkit' for e in m.entry_points(group='pytest11')))"; then
  plugin=()
fi
timeout 300 "$PY" -m pytest "${plugin[@]}" -q -p no:cacheprovider tests/backends/test_prototype_cache.py \
  tests/lint/test_compile_cache.py tests/lint/test_cache.py > "$OUT/pytest-prototype-cache.txt" 2>&1
row "pytest prototype cache (GPU test included)" "$(tail -n 1 "$OUT/pytest-prototype-cache.txt")"
echo
cat "$summary"
# The device tool brings back 8 files: everything but the summary goes in one archive.
(cd "$OUT" && tar czf startup-logs.tgz --exclude startup.txt --exclude startup-logs.tgz \
  --remove-files -- *)
