#!/usr/bin/env bash
# Issue 14 on a GPU machine: cold start-up of `portkit check sigmoid`, the lockstep and
# per-thread engines against the GPU (tests/simt/test_simt_gpu.py, both engines), and
# the GPU tier of the generated suite on one GPU, then spread over every visible GPU
# with pytest-xdist (one worker per GPU, pinned by portkit's pytest plugin).
#
#   OUT=/some/folder scripts/gpu-scale.sh      # under 6 minutes
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl; export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export XDG_CACHE_HOME=/tmp/portkit-scale-cache  # fresh twin cache: cold compiles
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || echo 0)
summary="$OUT/summary.txt"
: > "$summary"
row() { printf '%-52s %s\n' "$1" "$2" | tee -a "$summary"; }
# The plugin generates the op suite; load it by name where no entry point does (not installed).
plugin=(-p portkit.pytest_plugin)
if "$PY" -c "import sys, importlib.metadata as m; sys.exit(not any(e.name == 'portkit' for e in m.entry_points(group='pytest11')))"; then
  plugin=()
fi

# 1. Cold start-up: a fresh process, twin cache empty, then warm (cache filled).
for run in cold warm; do
  /usr/bin/time -f "%e" -o "$OUT/check-$run.time" "$PY" -m portkit.cli check sigmoid \
    > "$OUT/check-sigmoid-$run.txt" 2>&1
  status=$?
  row "portkit check sigmoid ($run process)" "$(tail -n 1 "$OUT/check-$run.time") s, exit $status"
done
/usr/bin/time -f "%e" -o "$OUT/import.time" "$PY" -c "import torch, numba.cuda; torch.zeros(1, device='cuda')"
row "floor: import torch + numba.cuda + CUDA context" "$(cat "$OUT/import.time") s"

# 2. Both simulator engines against the GPU on the kernel bank.
for engine in lockstep per-thread; do
  PORTKIT_SIMT_ENGINE=$engine timeout 150 "$PY" -m pytest "${plugin[@]}" -q -p no:cacheprovider \
    tests/simt/test_simt_gpu.py > "$OUT/simt-gpu-$engine.txt" 2>&1
  row "simulator ($engine) vs GPU, kernel bank" "$(tail -n 1 "$OUT/simt-gpu-$engine.txt")"
done

# 3. The GPU tier of the generated suite (two ops, bounded): one GPU, then one worker per GPU.
selection=(prototypes/sigmoid.py prototypes/softmax.py -m gpu)
start=$(date +%s.%N)
CUDA_VISIBLE_DEVICES=0 timeout 150 "$PY" -m pytest "${plugin[@]}" -q -p no:cacheprovider "${selection[@]}" \
  > "$OUT/suite-1gpu.txt" 2>&1
end=$(date +%s.%N)
row "pytest GPU tier, 1 GPU" "$("$PY" -c "print(f'{$end - $start:.1f}')") s: $(tail -n 1 "$OUT/suite-1gpu.txt")"
if [ "$gpus" -ge 2 ]; then
  start=$(date +%s.%N)
  timeout 150 "$PY" -m pytest "${plugin[@]}" -q -p no:cacheprovider -n "$gpus" "${selection[@]}" \
    > "$OUT/suite-ngpu.txt" 2>&1
  end=$(date +%s.%N)
  row "pytest GPU tier, -n $gpus (one worker per GPU)" "$("$PY" -c "print(f'{$end - $start:.1f}')") s: $(tail -n 1 "$OUT/suite-ngpu.txt")"
else
  row "pytest GPU tier, -n GPUs" "skipped: $gpus GPU visible (needs 2)"
fi
echo
cat "$summary"
