#!/usr/bin/env bash
# Issue 15 (twin-cpu) on the GPU machine: the same twin on the GPU and on the CPU, element
# by element (how many ULPs apart), the CPU twin's tests and check there, and its speed.
#   OUT=/some/folder bash scripts/gpu-15-twincpu.sh      (at most about 6 minutes: each step has its own timeout)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl; export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export XDG_CACHE_HOME=/tmp/portkit-twincpu-cache
{ for c in g++ clang++ c++; do command -v "$c" && "$c" --version | head -1; done; nvidia-smi --query-gpu=name --format=csv,noheader; } > "$OUT/machine.txt" 2>&1
# 1. GPU twin (NVRTC) against CPU twin (host compiler), every op, every case up to 1M input elements.
timeout 120 python3 scripts/compare_twin_cpu_gpu.py --largest 1048576 --json "$OUT/twin-gpu-vs-cpu.json" > "$OUT/twin-gpu-vs-cpu.txt" 2>&1
compare=$?
# 2. The CPU twin's own tests, and check --all on the CPU backends, on this machine too.
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/backends/test_twin_cpu_header.py tests/backends/test_twin_cpu_backend.py > "$OUT/pytest-twin-cpu.txt" 2>&1
tests=$?
timeout 90 python3 -m portkit.cli check --all --no-compile --backend twin-cpu --backend torch > "$OUT/check-twin-cpu.txt" 2>&1
check=$?
# 3. Simulated threads per second on this host's CPU.
timeout 45 python3 scripts/bench_twin_cpu.py > "$OUT/bench-twin-cpu.txt" 2>&1
echo "== summary"
cat "$OUT/machine.txt"
tail -n 1 "$OUT/twin-gpu-vs-cpu.txt"
tail -n 1 "$OUT/pytest-twin-cpu.txt"
tail -n 1 "$OUT/check-twin-cpu.txt"
cat "$OUT/bench-twin-cpu.txt"
printf '%-28s %s\n' "gpu twin vs cpu twin (rc)" "$compare" "twin-cpu pytest (rc)" "$tests" "check twin-cpu (rc)" "$check" | tee "$OUT/summary.txt"
