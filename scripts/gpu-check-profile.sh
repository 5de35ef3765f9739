#!/usr/bin/env bash
# Issue 14: where a warm `portkit check sigmoid` spends its time on a GPU machine, with a
# bytecode cache (the image writes none by default): three timed runs of the check, of its
# GPU tiers alone and of single tiers, a cProfile and -X importtime. (--backend repeats:
# "--backend torch,numba,twin" is one unknown name and exits at once.)
#
#   OUT=/some/folder bash scripts/gpu-check-profile.sh      # about 2 minutes
set -uo pipefail
cd "$(dirname "$0")/.."
export XDG_CACHE_HOME=/tmp/portkit-profile-cache-$$
source scripts/gpu-env.sh > /dev/null
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX=/tmp/portkit-pyc-$$
check=(-m portkit.cli check sigmoid)
"$PY" "${check[@]}" > "$OUT/fill.txt" 2>&1
"$PY" "${check[@]}" > /dev/null 2>&1
"$PY" -c "import torch, numba.cuda; torch.zeros(1, device='cuda')"
timed() {  # LABEL CMD...: three runs, wall seconds
  local label=$1; shift
  local times=()
  for _ in 1 2 3; do
    local start=$(date +%s.%N)
    "$@" > /dev/null 2>&1
    times+=("$("$PY" -c "print(f'{$(date +%s.%N) - $start:.2f}')")")
  done
  printf '%-58s %s\n' "$label" "${times[*]}" >> "$OUT/profile-summary.txt"
}
: > "$OUT/profile-summary.txt"
timed "floor: import torch, numba.cuda + context" "$PY" -c "import torch, numba.cuda; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"
timed "floor + symbolic_shapes" "$PY" -c "import torch, numba.cuda, torch.fx.experimental.symbolic_shapes; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"
timed "portkit check sigmoid" "$PY" "${check[@]}"
timed "portkit check sigmoid, GPU tiers only" "$PY" "${check[@]}" --backend torch --backend numba --backend twin
timed "portkit check sigmoid --quick" "$PY" "${check[@]}" --quick
timed "portkit check sigmoid --backend sim" "$PY" "${check[@]}" --backend sim
timed "portkit check sigmoid --backend twin-cpu" "$PY" "${check[@]}" --backend twin-cpu
timed "portkit check sigmoid --backend twin --quick" "$PY" "${check[@]}" --backend twin --quick
"$PY" "${check[@]}" -v > "$OUT/check-v.txt" 2>&1
# --json: no progress bar, whose refresh thread cProfile would mix into the main thread's.
"$PY" -m cProfile -o "$OUT/check.prof" "${check[@]}" --json > /dev/null 2>&1
"$PY" - "$OUT/check.prof" > "$OUT/check-profile.txt" <<'PY'
import pstats, sys
stats = pstats.Stats(sys.argv[1])
stats.sort_stats("cumulative").print_stats(70)
stats.sort_stats("tottime").print_stats(40)
PY
"$PY" -X importtime "${check[@]}" 2> "$OUT/importtime.txt" > /dev/null
sort -t'|' -k2 -n -r "$OUT/importtime.txt" | head -40 > "$OUT/importtime-top.txt"
cat "$OUT/profile-summary.txt"
