python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl; export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
# Issue 10 on a GPU machine: is a green check memory-safe?
#   1. the wrong-twin bank under portkit check (guard zones, values) and the sanitizer
#      tier, pytest items run as parallel shards;
#   2. every good op (and the bank's own `total`) under the four compute-sanitizer tools,
#      with the seconds of each tool against the plain check, per op;
#   3. the overhead of guard zones (scripts/bench_guards.py on twin + numba);
#   4. experiments: does initcheck see shared memory? a divergent barrier whose skipping
#      threads stay alive;
# then a summary table. Writes at most 8 files to $OUT. Runs from the repo root:
#   OUT=/some/folder bash scripts/gpu-trust.sh
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export XDG_CACHE_HOME=/tmp/trust-cache COLUMNS=200
WORK=$(mktemp -d /tmp/trust.XXXXXX)
T0=$(date +%s)
elapsed() { echo $(( $(date +%s) - T0 )); }

{
  date -u +"date: %Y-%m-%dT%H:%MZ"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | sed 's/^/gpu: /'
  echo "compute-sanitizer: $(compute-sanitizer --version 2>/dev/null | tail -n 1)"
  "$PY" - <<'PY'
import platform
from importlib.metadata import version
print("python:", platform.python_version())
for name in ("torch", "numba-cuda", "numpy", "cuda-core", "cuda-bindings", "pytest"):
    try:
        print(f"{name}: {version(name)}")
    except Exception as exc:
        print(f"{name}: ? ({exc})")
PY
} > "$OUT/versions.txt" 2>&1
cat "$OUT/versions.txt"

# -- 4 (background, alongside 1): experiments -------------------------------------------
experiment() {
  local dir="$WORK/exp" py=prototypes/softmax.py
  mkdir -p "$dir/prototypes" "$dir/cuda_src"
  printf '[project]\nname = "exp"\nversion = "0"\n[tool.portkit]\ncache-dir = ".cache"\n' \
    > "$dir/pyproject.toml"
  cp "$py" "$dir/prototypes/exp_uninit_shared.py"
  cp "$py" "$dir/prototypes/exp_divergent_alive.py"
  # Threads past the row's width leave their slot of buf unwritten; the reduction reads it.
  sed '0,/    buf\[tid\] = m;/s//    if (tid < cols) buf[tid] = m;/' cuda_src/softmax.cu \
    > "$dir/cuda_src/exp_uninit_shared.cu"
  # A barrier skipped by threads past the width, which stay alive for the next barriers.
  sed '0,/    m = block_reduce(buf, tid, true);/s//    if (tid < cols) __syncthreads();\n    m = block_reduce(buf, tid, true);/' \
    cuda_src/softmax.cu > "$dir/cuda_src/exp_divergent_alive.cu"
  cd "$dir" || return
  for tool in initcheck racecheck; do
    timeout 100 "$PY" -m portkit.cli check exp_uninit_shared --sanitize "$tool" \
      --case float32-3x127 --sanitize-log-dir "$dir/logs-uninit" > "$dir/uninit-$tool.txt" 2>&1
    echo "exit $?" >> "$dir/uninit-$tool.txt"
  done
  timeout 100 "$PY" -m portkit.cli check exp_uninit_shared --backend twin --no-compile \
    --case float32-3x127 --case float32-1x1 > "$dir/uninit-check.txt" 2>&1
  echo "exit $?" >> "$dir/uninit-check.txt"
  timeout 100 "$PY" -m portkit.cli check exp_divergent_alive --sanitize synccheck \
    --case float32-3x127 --sanitize-log-dir "$dir/logs-divergent" > "$dir/divergent.txt" 2>&1
  echo "exit $?" >> "$dir/divergent.txt"
}
(experiment) &
EXP_PID=$!

# -- 1: the bank, in parallel shards ---------------------------------------------------------
# portkit's pytest plugin registers the gpu marker; without an installed entry point,
# load it by name (pyproject's --strict-markers rejects unknown markers).
plugin=(-p portkit.pytest_plugin)
if "$PY" -c "import sys, importlib.metadata as m; sys.exit(not any(e.name == 'portkit' for e in m.entry_points(group='pytest11')))"; then
  plugin=()
fi
SELECT="check_catches or sanitizer_catches or writes_past"
"$PY" -m pytest "${plugin[@]}" tests/check/test_wrong_twins.py -m gpu -k "$SELECT" \
  --collect-only -q -p no:cacheprovider > "$WORK/collect.txt" 2>&1
grep '::' "$WORK/collect.txt" > "$WORK/ids.txt"
SHARDS=6
for i in $(seq 0 $((SHARDS - 1))); do
  awk -v n=$SHARDS -v i="$i" 'NR % n == i' "$WORK/ids.txt" > "$WORK/ids$i.txt"
  if [ -s "$WORK/ids$i.txt" ]; then
    timeout 170 "$PY" -m pytest "${plugin[@]}" -q -rfE -p no:cacheprovider --basetemp="$WORK/bt$i" \
      $(cat "$WORK/ids$i.txt") > "$WORK/shard$i.txt" 2>&1 &
  fi
done
wait $(jobs -p | grep -v "^$EXP_PID$") 2>/dev/null
{
  echo "bank: $(wc -l < "$WORK/ids.txt") GPU items in $SHARDS shards, $(elapsed) s since start"
  [ -s "$WORK/ids.txt" ] || tail -n 30 "$WORK/collect.txt"
  for f in "$WORK"/shard*.txt; do echo "== $f"; grep -E "passed|failed|error|FAILED|ERROR|^E " "$f" | head -40; done
} > "$OUT/bank.txt"
BANK_PASSED=$(grep -hoE "[0-9]+ passed" "$WORK"/shard*.txt | awk '{s+=$1} END {print s+0}')
BANK_FAILED=$(grep -hoE "[0-9]+ (failed|error)" "$WORK"/shard*.txt | awk '{s+=$1} END {print s+0}')
echo "bank: $BANK_PASSED passed, $BANK_FAILED failed ($(elapsed) s)"

# -- 2: good ops under the four tools, against the plain check --------------------------------
GOOD="$WORK/good"
mkdir -p "$GOOD/prototypes" "$GOOD/cuda_src"
printf '[project]\nname = "good"\nversion = "0"\n[tool.portkit]\ncache-dir = ".cache"\n' \
  > "$GOOD/pyproject.toml"
cp prototypes/*.py "$GOOD/prototypes/"; cp cuda_src/*.cu "$GOOD/cuda_src/"
cp tests/check/wrong_twins/_ops/total.py "$GOOD/prototypes/"
cp tests/check/wrong_twins/_ops/total.cu "$GOOD/cuda_src/"
CASES=(--case float32-n129 --case float64-n129 --case float32-3x127 --case float32-n1000)
timed() {  # timed NAME command...: wall seconds to $WORK/NAME.wall, stdout to NAME.json
  local name=$1; shift
  local t=$(date +%s%N)
  (cd "$GOOD" && timeout 150 "$@") > "$WORK/$name.json" 2> "$WORK/$name.err"
  awk -v ns=$(( $(date +%s%N) - t )) 'BEGIN { printf "%.1f\n", ns / 1e9 }' > "$WORK/$name.wall"
}
# Warm the twin cache first, so no run pays NVRTC and all pay the same.
(cd "$GOOD" && timeout 60 "$PY" -m portkit.cli compile > /dev/null 2>&1)
timed plain "$PY" -m portkit.cli check --all --backend twin --backend numba --no-compile \
  --json "${CASES[@]}" &
for tool in memcheck racecheck initcheck synccheck; do
  timed "$tool" "$PY" -m portkit.cli check --all --sanitize "$tool" --json "${CASES[@]}" \
    --sanitize-log-dir "$WORK/good-logs" &
done
wait $(jobs -p | grep -v "^$EXP_PID$") 2>/dev/null
"$PY" scripts/trust_report.py "$WORK" > "$OUT/tools.md" 2>&1
echo "tools: $(elapsed) s"

# -- 3: guard overhead ------------------------------------------------------------------------
timeout 60 "$PY" scripts/bench_guards.py --backend twin --backend numba --repeat 3 --small \
  --op vector_add --op sigmoid --op softmax > "$OUT/guards.md" 2>&1
echo "guards: $(elapsed) s"

wait "$EXP_PID" 2>/dev/null
{
  for f in "$WORK"/exp/*.txt; do echo "== $f"; tail -n 25 "$f"; done
} > "$OUT/experiments.txt" 2>&1

# Raw logs for the parser's tests (tests/sanitize/logs/gpu-*.log), capped at 64 KiB each.
mkdir -p "$WORK/logs"
n=0
for log in $(find "$WORK" -name '*.log' -path '*sanitize*' -o -name '*.log' -path '*logs-*' \
             -o -name '*.log' -path '*good-logs*' | sort); do
  op=$(grep -ohE '(wt|exp)_[a-z_]+' "$log" "$(dirname "$log")"/*.check.txt 2>/dev/null | head -n 1)
  n=$((n + 1)); head -c 65536 "$log" > "$WORK/logs/gpu-$(basename "$log" .log)-${op:-good}-$n.log"
done
tar -czf "$OUT/sanitizer-logs.tar.gz" -C "$WORK/logs" . 2>/dev/null

{
  echo "# gpu-trust summary ($(elapsed) s)"
  head -n 3 "$OUT/versions.txt"
  echo
  echo "| step | result |"
  echo "|---|---|"
  echo "| wrong-twin bank (check + sanitizer items) | $BANK_PASSED passed, $BANK_FAILED failed |"
  echo "| good ops clean under 4 tools | $(grep -o 'ALL FOUR TOOLS: .*' "$OUT/tools.md" | cut -d' ' -f4) |"
  echo "| guard overhead (twin+numba) | $(grep '^| [a-z_]* |' "$OUT/guards.md" | grep -vc '^| op |') ops timed, see guards.md |"
  echo "| raw sanitizer logs | $n in sanitizer-logs.tar.gz |"
  echo
  cat "$OUT/tools.md"
  echo
  cat "$OUT/guards.md"
} > "$OUT/summary.md"
cat "$OUT/summary.md"
