#!/usr/bin/env bash
# Time alternative twins against torch and the repository's twin, without touching cuda_src/.
#
#   bash scripts/bench_alternatives.sh [FILE.cu ...]      # default: scripts/tuning/*.cu
#   BENCH_ARGS="--reps 20 --direction forward" bash scripts/bench_alternatives.sh
#   CHECK=0 bash scripts/bench_alternatives.sh   # time only: no `portkit check` of each
#   COMPILE=0 bash scripts/bench_alternatives.sh # no torch.compile rows (saves its compiles)
#
# A file scripts/tuning/<op>_<variant>.cu holds the same kernels (names and signatures) as
# cuda_src/<op>.cu, written another way. For each file this runs `portkit bench <op>` twice,
# torch and twin rows, in a scratch project whose pyproject.toml points at the repository's
# prototypes/ and at a cuda_src/ where <op>.cu is first the repository's, then the
# alternative (every other twin is a link to the repository's), the repository's tuning/
# linked so both run this GPU's tuned configurations; then `portkit check` of the
# alternative. Compare the "x best" columns of the two runs: each ratio is the fastest
# torch (the op's baseline=, the reference, torch.compile of it) and a twin timed side by
# side in one run. (Without torch.compile, as on 2026-11-28, "best" was the reference.)
set -uo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
FILES=("$@")
if [ ${#FILES[@]} -eq 0 ]; then
  shopt -s nullglob
  FILES=("$REPO"/scripts/tuning/*.cu)
fi
if [ ${#FILES[@]} -eq 0 ]; then
  echo "no alternative twins: scripts/tuning/ has no .cu files" >&2
  exit 2
fi
PY=${PYTHON:-python3}
impls=(--impl torch --impl baseline --impl twin)
[ "${COMPILE:-1}" = 1 ] && impls+=(--impl torch.compile)
status=0
for file in "${FILES[@]}"; do
  stem=$(basename "$file" .cu)
  op=""  # the longest cuda_src/<op>.cu that the file's name starts with
  for src in "$REPO"/cuda_src/*.cu; do
    name=$(basename "$src" .cu)
    if [[ $stem == "${name}_"* && ${#name} -gt ${#op} ]]; then op=$name; fi
  done
  if [ -z "$op" ]; then
    echo "$file: its name does not start with an op of cuda_src/ and '_'" >&2
    status=2
    continue
  fi
  for which in repository "$stem"; do
    scratch=$(mktemp -d)
    mkdir "$scratch/cuda_src"
    ln -s "$REPO"/cuda_src/*.cu "$scratch/cuda_src/"
    # the repository's tuning tables: both twins run the configurations this GPU's table
    # picks (without them both ran the defaults, not what portkit.load runs)
    [ -d "$REPO/tuning" ] && ln -s "$REPO/tuning" "$scratch/tuning"
    if [ "$which" != repository ]; then
      rm "$scratch/cuda_src/$op.cu"
      cp "$file" "$scratch/cuda_src/$op.cu"
    fi
    printf '[tool.portkit]\nprototypes = "%s/prototypes"\n' "$REPO" > "$scratch/pyproject.toml"
    echo "=== $op: $which twin"
    (cd "$scratch" && PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m portkit.cli bench "$op" \
      "${impls[@]}" ${BENCH_ARGS:-}) || status=1
    if [ "$which" != repository ] && [ "${CHECK:-1}" = 1 ]; then
      # faster means nothing if wrong: every configuration the table picks, against the
      # reference and numba (CHECK=0 leaves it out)
      echo "=== $op: $which twin checked"
      (cd "$scratch" && PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m portkit.cli check \
        "$op" --backend twin --backend numba --no-compile) || status=1
    fi
    rm -rf "$scratch"
  done
done
exit $status
