#!/usr/bin/env bash
# What portkit verifies on a GPU machine, one subcommand per claim, run from the repository
# root with the machine's own Python:
#
#   OUT=/some/folder bash scripts/gpu.sh SUBCOMMAND
#
#   suite      the whole pytest suite (-n 8), `portkit check --all`, `portkit bench --all`:
#              every test and op passes on the GPU and every op benches (exit 0)
#   trust      the wrong-twin bank: `portkit check` fails each wrong twin on the rows it
#              should, `portkit diff` names the element, thread and pattern
#   sanitizer  the bank under compute-sanitizer, the good ops clean under all four tools
#              (seconds against the plain check), and what guard zones cost
#   export     the twins as registered ops (opcheck, torch.compile, CUDA graphs), and every
#              op exported, installed in a fresh venv and run there with portkit and numba
#              blocked for every dtype it takes (the same three), equal to the twin, on
#              portkit's compiled replayer and C++ autograd node; the package's host cost
#              per call beside portkit.load's (scripts/bench_launch.py, "fwd x twin")
#   bench      `portkit bench --all` (table, JSON, plot), its GPU tests and the plugin's
#              bench items against that baseline, host cost per call, ncu of softmax
#   startup    `portkit check sigmoid` from fresh processes against the floor (import
#              torch + numba + a CUDA context), the caches' tests, where a warm check's
#              time goes (cProfile, -X importtime)
#   twin-cpu   the same twin on the GPU and on the CPU, ULPs apart; the CPU twin's tests
#   simulator  both simulator engines against the GPU; `portkit diff` of 16M elements
#   replay     the compiled launch replayer builds and loads; tests/launch; its cost
#   scale      the generated suite's GPU tier on one GPU, then one worker per GPU
#   speed      the twins against the best of torch in one call: `portkit tune` of the
#              knobbed ops timed against torch (sigmoid, rmsnorm, layernorm, softmax,
#              softmax_warp; SPEED_OPS="a b" narrows them; add_rmsnorm's search never fit
#              its step) with a small budget
#              (tables to $OUT/speed/tuning/; TUNE=0 skips it and times the committed
#              tables; TUNE_CASES="op=case,case ..." tunes only those cases (an op it does
#              not name is not tuned, only timed and checked), TUNE_LIMIT
#              seconds an op, TUNE_BUDGET configurations a case, 10), then
#              scripts/time_vs_torch.py (TVT_COMPILE=1: with torch.compile per shape,
#              TVT_LIMIT seconds; TVT=0 leaves it out) and `portkit bench` of every example op (torch,
#              baseline, twin; BENCH=0 leaves it out) with them and a bench of the knobbed ops
#              with torch.compile of each reference (BENCH_COMPILE=0 leaves it out: without it
#              "best of torch" is not), then `portkit check`
#              of SPEED_OPS' configurations (CHECK_TUNED=0: not); limits add up to 1005 s (TUNE=0: 710;
#              it took about 300 s on an H200); tuning and both benches pass 10 minutes: tune
#              in one call (BENCH=0 BENCH_COMPILE=0), then time in another (TUNE=0)
#   phases     docs/ci.md's GPU job: `portkit check --phase gpu --verdicts FILE` (FILE
#              starts as $VERDICTS, the CPU phase's, where given), then the same command
#              with nothing changed (every row cached), then with a fresh verdicts file
#              and the compile caches kept (every row run); PHASE_OPS="sigmoid softmax"
#              narrows it (default --all); the verdicts come back in $OUT/phases.tgz
#   tune       `portkit tune` of the six knobbed ops, dealt over the GPUs (one search per
#              card at a time; TUNE_BUDGET configurations a case; TUNE_OPS="a b" narrows), the tables merged into
#              tuning/ and copied to $OUT/tuning/ to commit; then `portkit check` of every
#              configuration the tables pick and the tuning tests (CHECK_TUNED=0: not)
#   pytest     the given pytest arguments with this script's setup, each item named and
#              every failure's traceback (PYTEST_LIMIT seconds, 500 by default), e.g.
#              `gpu.sh pytest tests/watch/test_resident.py` after a tier named its failures
#   tier       after a change: the suite's GPU tier over every GPU (-vv: each item's verdict in
#              the log even if the step is cut; TIER_PATHS="tests" narrows it, TIER_LIMIT
#              its seconds, 420 by default), the simulator's verdict bank against numba on
#              the GPU (100 launches each), the third-party kernels on the GPU beside the simulator
#   seeds      tests/user_ops's ops, the repository's ops (--quick) and the norms' GPU-sized
#              cases with 20 seeds (worst margins; the ops dealt over the GPUs), the exported
#              package's host cost beside portkit.load's
#   large-seeds  the norms' GPU-sized cases alone, 20 seeds each, one (op, case) at a time
#              per GPU (LARGE_OPS="a b" narrows them, SEEDS_LIMIT seconds a step, 500;
#              SEEDS_PER_STEP=5 splits each case's seeds into steps of 5, --first-seed)
#   shards     the generated suite on one GPU (with cores/GPUs xdist workers), then sharded
#              over every GPU (--portkit-shard K/N, scripts/shard_suite.sh: N runners'
#              worth), both without the verdict store and with warm compilers' caches
#              (WARM=1: an earlier subcommand warmed PORTKIT_GPU_CACHE), then `portkit
#              check --all` (-j 1), the same with nothing changed (every row cached), and
#              --no-cache -j GPUs (CHECK_ALL=0 leaves those three out); ALONE=1 adds each
#              shard run alone on one GPU and its cores (a runner of its own), AT_ONCE=0
#              leaves out the N shards at once on this host
#
# Every step has its own timeout; each subcommand stays under 10 minutes. Logs go to
# $OUT/NAME/ and are packed into $OUT/NAME.tgz (one file to copy off the machine);
# the table of steps (exit code, seconds, last line) is $OUT/NAME-summary.txt, printed last.
#
# numba-cuda 0.30 needs NumPy < 2.5: a NumPy 2.4.6 wheel put in .whl/ is installed first
# (for a machine without network whose NumPy is newer).
cd "$(dirname "$0")/.." || exit 2
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
set -uo pipefail
SUB=${1:-}
shift || true
ARGS=("$@")  # the pytest subcommand's arguments
OUT=${OUT:-$PWD/gpu-out}
LOGS=$OUT/$SUB
PY=${PYTHON:-python3}
# A fresh cache per call (cold compiles) unless PORTKIT_GPU_CACHE names one that
# subcommands run one after another share (e.g. `tier` then `WARM=1 shards`).
export XDG_CACHE_HOME=${PORTKIT_GPU_CACHE:-/tmp/portkit-gpu-cache-$SUB-$$}
# Python bytecode: a profile of one `portkit check` there (2026-11-28) compiled 1,443
# modules from source (torch, sympy: 4.6 s of 40), so the image keeps no bytecode for
# them and every process paid it again. A pip-installed torch keeps its bytecode, so a
# user's runner pays it once: give each call a bytecode cache of its own (the first
# process writes it, the rest read it). BYTECODE=0 leaves the image as it is.
BYTECODE_BEFORE="PYTHONDONTWRITEBYTECODE=${PYTHONDONTWRITEBYTECODE-unset}, PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX-unset}"
if [ "${BYTECODE:-1}" != 0 ]; then
  export PYTHONPYCACHEPREFIX=$XDG_CACHE_HOME/pycache
  unset PYTHONDONTWRITEBYTECODE
fi
export COLUMNS=200
ROWS=()

# The plugin registers the gpu marker; load it by name only where no entry point does.
PLUGIN=(-p portkit.pytest_plugin)
if "$PY" -c "import sys, importlib.metadata as m; sys.exit(not any(e.name == 'portkit' for e in m.entry_points(group='pytest11')))"; then
  PLUGIN=()
fi
PYTEST=("$PY" -m pytest "${PLUGIN[@]}" -q -rfE -p no:cacheprovider)
PORTKIT=("$PY" -m portkit.cli)

step() {  # step NAME SECONDS COMMAND...: run it under a timeout, log and time it
  local name=$1 limit=$2; shift 2
  local start=$SECONDS
  timeout "$limit" "$@" > "$LOGS/$name.txt" 2>&1
  local rc=$?
  local last
  last=$(grep -v '^\s*$' "$LOGS/$name.txt" | tail -n 1 | cut -c1-110)
  ROWS+=("$(printf '| %-26s | %4s | %5s | %s |' "$name" "$rc" "$((SECONDS - start))" "$last")")
  return $rc
}

machine() {
  {
    date -u +"date: %Y-%m-%dT%H:%MZ"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | sed 's/^/gpu: /'
    # cores against hardware threads: N shards pinned to N core ranges share physical
    # cores where the machine has two threads a core
    lscpu 2>/dev/null | grep -E '^(Model name|Socket|Core|Thread|CPU\(s\)|NUMA node[0-9]* CPU)' | sed 's/^/cpu: /'
    echo "bytecode: the image had $BYTECODE_BEFORE; this call: PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX-unset}"
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
  } > "$LOGS/machine.txt" 2>&1
}

project_of() {  # project_of DIR: an empty portkit project (cache inside) in DIR
  mkdir -p "$1/prototypes" "$1/cuda_src"
  printf '[project]\nname = "p"\nversion = "0"\n[tool.portkit]\ncache-dir = ".cache"\n' \
    > "$1/pyproject.toml"
}

# -- the subcommands --------------------------------------------------------------------------
suite() {
  step pytest 320 "${PYTEST[@]}" -n 8 tests prototypes
  step check-all 80 "${PORTKIT[@]}" check --all
  step bench-all 150 "${PORTKIT[@]}" bench --all --reps 10 --warmup 2 --save "$LOGS/bench.json"
}

trust() {
  local t=tests/check/test_wrong_twins.py
  step bank-check 360 "${PYTEST[@]}" -n 8 -m gpu "$t::test_check_catches_wrong_twin"
  step bank-diff 120 "${PYTEST[@]}" -m gpu "$t::test_diff_names_element_thread_and_pattern" \
    "$t::test_bound_off_by_one_writes_past_the_end"
}

sanitizer() {
  local t=tests/check/test_wrong_twins.py good=/tmp/portkit-good-$$
  step bank-sanitizer 170 "${PYTEST[@]}" -n 6 -m gpu "$t::test_sanitizer_catches_wrong_twin"
  # The good ops (and the bank's own `total`) under each tool against the plain check.
  project_of "$good"
  cp prototypes/*.py tests/check/wrong_twins/_ops/total.py "$good/prototypes/"
  cp cuda_src/*.cu tests/check/wrong_twins/_ops/total.cu "$good/cuda_src/"
  local cases=(--case float32-n129 --case float64-n129 --case float32-3x127 --case float32-n1000)
  (cd "$good" && timeout 60 "${PORTKIT[@]}" compile > /dev/null 2>&1)  # no run pays NVRTC
  timed() {  # timed NAME COMMAND...: its JSON to $good/NAME.json, wall seconds to NAME.wall
    local name=$1 start=$SECONDS; shift
    (cd "$good" && timeout 170 "$@") > "$good/$name.json" 2> "$good/$name.err"
    echo $((SECONDS - start)) > "$good/$name.wall"
  }
  timed plain "${PORTKIT[@]}" check --all --backend twin --backend numba --no-compile --json \
    "${cases[@]}" &
  for tool in memcheck racecheck initcheck synccheck; do
    timed "$tool" "${PORTKIT[@]}" check --all --sanitize "$tool" --json "${cases[@]}" \
      --sanitize-log-dir "$good/logs" &
  done
  wait
  step good-ops-four-tools 20 "$PY" scripts/trust_report.py "$good"
  step guard-overhead 80 "$PY" scripts/bench_guards.py --backend twin --backend numba \
    --repeat 3 --small --op vector_add --op sigmoid --op softmax
}

export_() {
  step torch-op 150 "${PYTEST[@]}" -n 4 tests/torch_op
  # Every op exported for this GPU, installed in a fresh venv, run there with portkit and
  # numba blocked for every dtype it takes (opcheck, torch.compile, CUDA graphs), equal
  # to portkit.load(op, "twin"); and the CPU export tests on this machine's NVRTC.
  step exported-every-op 400 "${PYTEST[@]}" -n 4 tests/export/test_export_gpu.py \
    tests/export/test_export_contract.py
  # The package's forward and forward + backward beside portkit.load's and torch's, its
  # compiled path and its Python one (PORTKIT_REPLAY=python), interleaved rounds.
  step exported-host-cost 200 "$PY" scripts/bench_launch.py --repeats 21 \
    --json "$LOGS/bench_launch.json"
}

bench() {
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader \
    > "$LOGS/clocks.txt" 2>&1
  step bench-all 180 "${PORTKIT[@]}" bench --all --reps 30 --save "$LOGS/bench.json" \
    --plot "$LOGS/bench.png"
  step tests-bench 100 "${PYTEST[@]}" tests/bench
  step plugin-bench-items 100 "${PYTEST[@]}" prototypes -m bench \
    --portkit-bench-baseline "$LOGS/bench.json" --portkit-bench-threshold 0.25
  step host-cost-per-call 80 "$PY" scripts/bench_launch.py --json "$LOGS/bench_launch.json"
  if command -v ncu > /dev/null; then
    step ncu-softmax 80 ncu --kernel-name regex:softmax --launch-count 16 --metrics \
      gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread \
      "$PY" scripts/ncu_softmax.py
  fi
}

startup() {
  step cold-vs-floor 240 "$PY" scripts/bench_startup.py --runs 3 --json "$LOGS/startup.json"
  step cache-tests 120 "${PYTEST[@]}" tests/backends/test_prototype_cache.py \
    tests/lint/test_compile_cache.py tests/lint/test_cache.py
  step check-v 50 "${PORTKIT[@]}" check sigmoid -v
  # --json: no progress bar, whose refresh thread cProfile would mix into the main thread.
  step profile 50 "$PY" -m cProfile -s cumulative -m portkit.cli check sigmoid --json
  step importtime 50 bash -c "$PY -X importtime -m portkit.cli check sigmoid 2>&1 >/dev/null \
    | sort -t'|' -k2 -n -r | head -40"
}

twin_cpu() {
  step gpu-vs-cpu-ulps 150 "$PY" scripts/compare_twin_cpu_gpu.py --largest 1048576 \
    --json "$LOGS/twin-gpu-vs-cpu.json"
  step tests-twin-cpu 120 "${PYTEST[@]}" tests/backends/test_twin_cpu_header.py \
    tests/backends/test_twin_cpu_backend.py
  step check-twin-cpu 120 "${PORTKIT[@]}" check --all --no-compile --backend twin-cpu --backend torch
  step threads-per-second 60 "$PY" scripts/bench_twin_cpu.py
}

simulator() {
  for engine in lockstep per-thread; do
    PORTKIT_SIMT_ENGINE=$engine step "engine-$engine" 150 "${PYTEST[@]}" tests/simt/test_simt_gpu.py
  done
  step diff-sigmoid-16M 60 "${PORTKIT[@]}" diff sigmoid --case float32-n16777216
  # A twin that writes nothing: the writers of the reported elements come from re-running
  # only their blocks in the simulator.
  local wrong=/tmp/portkit-wrong-$$
  project_of "$wrong"
  cp prototypes/vector_add.py "$wrong/prototypes/"
  cp tests/check/wrong_twins/vector_add/writes_nothing.cu "$wrong/cuda_src/vector_add.cu"
  step diff-wrong-twin-16M 90 bash -c 'cd "$1" && shift && "$@" diff vector_add \
    --case float32-n16777216' _ "$wrong" "${PORTKIT[@]}"
}

replay() {
  step build-replayer 200 "$PY" - <<'PY'
from torch.utils import cpp_extension
from portkit.runtime.native_replayer import SOURCE
cpp_extension.load("portkit_replay_buildcheck", [str(SOURCE)], extra_cflags=["-O2"], with_cuda=True)
from portkit.runtime.native_replayer import compiled_replayer
print("replayer:", type(compiled_replayer("gpu.sh")).__name__)  # None: stderr says why
PY
  step tests-launch 200 "${PYTEST[@]}" -n 4 tests/launch
  step replay-parts 120 "$PY" scripts/replay_parts.py
}

scale() {
  local gpus selection=(prototypes/sigmoid.py prototypes/softmax.py -m gpu)
  gpus=$(gpu_count)
  CUDA_VISIBLE_DEVICES=0 step gpu-tier-1-gpu 200 "${PYTEST[@]}" "${selection[@]}"
  if [ "$gpus" -ge 2 ]; then
    step "gpu-tier-$gpus-gpus" 200 "${PYTEST[@]}" -n "$gpus" "${selection[@]}"
  fi
}

tune() {
  local gpus k op ops
  read -r -a ops <<< "${TUNE_OPS:-rmsnorm layernorm add_rmsnorm softmax softmax_warp sigmoid}"
  gpus=$(gpu_count)
  # Each op on a GPU of its own (the ops dealt over the GPUs, one at a time on each), so
  # no two searches time on one card at once. TUNE_BUDGET: configurations per case.
  for ((k = 0; k < gpus; k++)); do
    (
      for op in $(dealt "$k" "$gpus" "${ops[@]}"); do
        step_on_gpu "$k" "tune-$op" "${TUNE_LIMIT:-170}" "${PORTKIT[@]}" tune "$op" \
          --budget "${TUNE_BUDGET:-32}" --reps 20 --warmup 2 --json \
          --time-limit "$((${TUNE_LIMIT:-170} * 2 / 3))"
        wait
      done
    ) &
  done
  wait
  collect_rows
  mkdir -p "$OUT/tuning" && cp tuning/*.json "$OUT/tuning/"
  [ "${CHECK_TUNED:-1}" = 1 ] || return 0
  step check-tuned 300 "${PORTKIT[@]}" check rmsnorm layernorm add_rmsnorm softmax softmax_warp sigmoid \
    --backend twin --backend numba --no-compile
  step tests-tuning 200 "${PYTEST[@]}" -n 4 tests/tuning tests/export/test_export_contract.py
}

speed() {
  local op op_limit cases limit
  local -a case_args
  if [ "${TUNE:-1}" != 0 ]; then
    # op:limit. H200, 2026-11-27 (--budget 10 --reps 15): rmsnorm 54 s, layernorm 55,
    # softmax 26, softmax_warp 15 (sigmoid's 9 configurations: one case, less). A cold H100
    # took longer (rmsnorm and layernorm past 75 s, softmax 70 s), and so did the H200 once
    # the knobs grew (softmax's 90 steps): tune the slow cases alone with
    # TUNE_CASES="softmax=float32-16384x1024,float32-32768x256 layernorm=bfloat16-16384x4096"
    # (other cases keep their table entries) and TUNE_LIMIT seconds an op.
    # SPEED_OPS="sigmoid layernorm" tunes only those (the call must fit 10 minutes: on an
    # H100, bench alone took 147 s; BENCH=0 leaves it out).
    for op_limit in sigmoid:45 rmsnorm:75 layernorm:75 softmax:50 softmax_warp:50; do
      op=${op_limit%:*}
      [[ " ${SPEED_OPS:-$op} " == *" $op "* ]] || continue
      case_args=()
      cases=$(tr ' ' '\n' <<< "${TUNE_CASES:-}" | sed -n "s/^$op=//p")
      [ -z "${TUNE_CASES:-}" ] || [ -n "$cases" ] || continue  # TUNE_CASES names others
      for case in ${cases//,/ }; do case_args+=(--case "$case"); done
      limit=${TUNE_LIMIT:-${op_limit#*:}}
      # --time-limit: a search cut short still writes the cases it finished (exit 3)
      step "tune-$op" "$limit" "${PORTKIT[@]}" tune "$op" --budget "${TUNE_BUDGET:-10}" --reps 15 --warmup 2 \
        --time-limit "$((limit * 2 / 3))" "${case_args[@]}"
    done
    mkdir -p "$LOGS/tuning" && cp tuning/*.json "$LOGS/tuning/"
  fi
  # H200, 2026-11-27: time-vs-torch 37 s, bench 58-111
  # TVT_COMPILE=1: the script times torch.compile too (a compile per line and direction:
  # give it TVT_LIMIT seconds, and the call its own 10 minutes with BENCH=0 TUNE=0)
  if [ "${TVT:-1}" != 0 ]; then
    step time-vs-torch "${TVT_LIMIT:-110}" "$PY" scripts/time_vs_torch.py \
      ${TVT_COMPILE:+--compile} --json "$LOGS/time_vs_torch.json"
  fi
  if [ "${BENCH:-1}" != 0 ]; then
    step bench 200 "${PORTKIT[@]}" bench sigmoid vector_add elementwise_mul softmax softmax_warp \
      layernorm rmsnorm add_rmsnorm cumsum histogram matmul --impl torch --impl baseline --impl twin --reps 20 \
      --save "$LOGS/bench.json"
  fi
  # torch.compile of each reference beside the twin: a compile per op, shape and
  # direction, too slow for the step above; the "best of torch" it may win. Default on:
  # the 2026-11-28 tables quoted "best of torch" from runs without it (H200, one call:
  # 113 s for the six ops).
  if [ "${BENCH_COMPILE:-1}" = 1 ]; then
    # shellcheck disable=SC2086
    step bench-compile "${BENCH_COMPILE_LIMIT:-400}" "${PORTKIT[@]}" bench ${SPEED_OPS:-sigmoid \
      softmax softmax_warp layernorm rmsnorm add_rmsnorm} --impl torch.compile --impl baseline \
      --impl twin --reps 20 --save "$LOGS/bench-compile.json"
  fi
  # Every configuration the tables can pick, on this GPU, against the reference and numba.
  if [ -n "${SPEED_OPS:-}" ] && [ "${CHECK_TUNED:-1}" = 1 ]; then
    # shellcheck disable=SC2086
    step check-tuned 200 "${PORTKIT[@]}" check $SPEED_OPS --backend twin --backend numba \
      --no-compile
  fi
}

pytest_() {
  step pytest "${PYTEST_LIMIT:-500}" "${PYTEST[@]}" -vv --tb=long --durations=20 "${ARGS[@]}"
}

tier() {
  local workers
  workers=$(($(nproc) * 3 / 4))
  # -v after PYTEST's -q only cancels it: -vv names each item with its verdict.
  # TIER_PATHS narrows it (e.g. "tests" where a shards run covered prototypes/).
  # shellcheck disable=SC2086
  step gpu-tier "${TIER_LIMIT:-420}" "${PYTEST[@]}" -n "$workers" -m gpu -vv --durations=40 ${TIER_PATHS:-tests prototypes}
  # The bank's recorded GPU outcomes, every kernel afresh (the file comes back in $OUT).
  cp tests/simt/verdict_bank_gpu.json "$OUT/verdict_bank_gpu.json"
  step verdict-bank 90 "$PY" scripts/gpu_verdict_bank.py --launches 100 \
    --json "$OUT/verdict_bank_gpu.json"
  step third-party-on-gpu 90 "$PY" -m tests.simt.third_party.runner --gpu
}

gpu_count() { local n; n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU '); echo $((n > 0 ? n : 1)); }

dealt() {  # dealt K N ITEMS...: the items for GPU K of N, dealt round robin
  local k=$1 n=$2 i=0
  shift 2
  for item in "$@"; do
    if ((i % n == k)); then echo "$item"; fi
    i=$((i + 1))
  done
}

step_on_gpu() {  # step_on_gpu K NAME SECONDS COMMAND...: step on GPU K alone, in the
  # background; its table row waits in $LOGS/NAME.row for collect_rows
  local k=$1 name=$2
  shift 2
  (CUDA_VISIBLE_DEVICES=$k step "$name" "$@"; printf '%s\n' "${ROWS[-1]}" > "$LOGS/$name.row") &
}

collect_rows() {  # after `wait`: the background steps' rows, in name order
  local row
  for row in "$LOGS"/*.row; do
    [ -f "$row" ] && ROWS+=("$(cat "$row")") && rm -f "$row"
  done
}

spread_seeds() {  # spread_seeds NAME LIMIT DIR OPTIONS...: DIR's ops with --seeds 20, the
  # ops dealt over the GPUs, one process per GPU
  local name=$1 limit=$2 dir=$3 gpus k ops=()
  shift 3
  gpus=$(gpu_count)
  for f in "$dir"/prototypes/*.py; do ops+=("$(basename "$f" .py)"); done
  for ((k = 0; k < gpus; k++)); do
    local mine
    mapfile -t mine < <(dealt "$k" "$gpus" "${ops[@]}")
    [ ${#mine[@]} -gt 0 ] || continue
    (cd "$dir" && step_on_gpu "$k" "$name-gpu$k" "$limit" "${PORTKIT[@]}" check "${mine[@]}" \
      --seeds 20 --backend numba,twin,torch --no-compile "$@"; wait) &
  done
  wait
  collect_rows
}

seeds() {
  local users=/tmp/portkit-user-ops-$$
  "$PY" -m tests.user_ops.project "$users" > /dev/null
  spread_seeds user-ops-seeds 150 "$users"
  spread_seeds repo-ops-seeds 300 "$PWD" --quick
  step norms-seeds 150 "${PORTKIT[@]}" check rmsnorm add_rmsnorm --seeds 20 \
    --backend numba,twin,torch --no-compile
  step exported-host-cost 100 "$PY" scripts/bench_launch.py --repeats 11 \
    --json "$LOGS/bench_launch.json"
}

large_seeds() {  # the norms' GPU-sized cases with 20 seeds, one (op, case, seeds) unit at
  # a time per GPU, dealt over the GPUs (LARGE_OPS="a b" narrows the ops, SEEDS_LIMIT the
  # seconds a unit, SEEDS_PER_STEP splits a case's 20 seeds into units of that many:
  # add_rmsnorm bfloat16-16384x4096 takes ~31 s a seed on an H200)
  local gpus k per=${SEEDS_PER_STEP:-20} pairs=() units=()
  gpus=$(gpu_count)
  mapfile -t pairs < <("$PY" -c "
import sys
from portkit.project.config import load_config
from portkit.project.discovery import discover
catalog = discover(load_config())
for op in sys.argv[1:]:
    for case in catalog.get(op).definition.cases:
        if case.large:
            print(op + '=' + case.name)
" ${LARGE_OPS:-rmsnorm add_rmsnorm layernorm})
  local pair first
  for pair in "${pairs[@]}"; do
    for ((first = 0; first < 20; first += per)); do units+=("$pair@$first"); done
  done
  for ((k = 0; k < gpus; k++)); do
    local mine
    mapfile -t mine < <(dealt "$k" "$gpus" "${units[@]}")
    [ ${#mine[@]} -gt 0 ] || continue
    (for unit in "${mine[@]}"; do
      pair=${unit%@*} first=${unit#*@}
      step_on_gpu "$k" "large-seeds-${pair//=/-}-from-$first" "${SEEDS_LIMIT:-500}" \
        "${PORTKIT[@]}" check "${pair%%=*}" --case "${pair#*=}" --first-seed "$first" \
        --seeds "$((first + per > 20 ? 20 - first : per))" --backend numba,twin,torch --no-compile
      wait
    done) &
  done
  wait
  collect_rows
}

shards() {
  local gpus per
  gpus=$(gpu_count)
  per=$(($(nproc) / gpus))
  local durations=$LOGS/durations.json
  # The suite's own time, not the verdict store's: both timed runs check every item, with
  # the compilers' caches warm (a first run warms them unless WARM=1 says an earlier
  # subcommand sharing PORTKIT_GPU_CACHE did) and the durations of the one-GPU run.
  if [ "${WARM:-0}" != 1 ]; then
    CUDA_VISIBLE_DEVICES=0 PORTKIT_VERDICT_CACHE=0 step warm-caches 240 "${PYTEST[@]}" \
      -n "$per" prototypes
  fi
  # One runner's worth: one GPU and its share of the cores (pinned to them, as each
  # shard is in shard_suite.sh); records the durations.
  local pin=()
  command -v taskset > /dev/null && pin=(taskset -c "0-$((per - 1))")
  CUDA_VISIBLE_DEVICES=0 PORTKIT_VERDICT_CACHE=0 step suite-1-gpu 240 "${pin[@]}" "${PYTEST[@]}" \
    -n "$per" prototypes --portkit-durations "$durations"
  if [ "$gpus" -ge 2 ] && [ "${AT_ONCE:-1}" = 1 ]; then
    OUT=$LOGS/shards WORKERS=$per PYTHON=$PY PORTKIT_VERDICT_CACHE=0 step "suite-$gpus-shards" \
      150 bash scripts/shard_suite.sh "$gpus" "${PLUGIN[@]}" -q -p no:cacheprovider \
      prototypes --portkit-durations "$durations"
  fi
  # Each shard alone, one after another, on one GPU and its cores: what shard K costs on
  # a runner of its own (a CI matrix of separate machines shares no disk, memory or driver)
  if [ "${ALONE:-0}" = 1 ] && [ "$gpus" -ge 2 ]; then
    local k
    for ((k = 1; k <= gpus; k++)); do
      cp "$durations" "$durations.alone.$k"  # read to balance, then holds shard k's items
      CUDA_VISIBLE_DEVICES=0 PORTKIT_VERDICT_CACHE=0 step "shard-$k-of-$gpus-alone" 120 \
        "${pin[@]}" "${PYTEST[@]}" -n "$per" prototypes --portkit-shard "$k/$gpus" \
        --portkit-durations "$durations.alone.$k"
    done
  fi
  [ "${CHECK_ALL:-1}" = 1 ] || return 0
  step check-all-j1 120 "${PORTKIT[@]}" check --all
  step check-all-no-change 60 "${PORTKIT[@]}" check --all
  step "check-all-j$gpus" 90 "${PORTKIT[@]}" check --all --no-cache -j "$((gpus > 0 ? gpus : 1))"
}

phases() {
  local verdicts=$LOGS/verdicts.json ops
  read -r -a ops <<< "${PHASE_OPS:---all}"
  if [ -n "${VERDICTS:-}" ]; then cp "$VERDICTS" "$verdicts"; fi
  step gpu-phase 240 "${PORTKIT[@]}" check "${ops[@]}" --phase gpu --verdicts "$verdicts"
  step gpu-phase-no-change 120 "${PORTKIT[@]}" check "${ops[@]}" --phase gpu --verdicts "$verdicts"
  # A CI GPU job that restores the cache folder (numba's and the twins' compiled kernels,
  # docs/ci.md) but has no GPU verdicts: every GPU row runs, nothing is compiled.
  step gpu-phase-compiled-kept 240 "${PORTKIT[@]}" check "${ops[@]}" --phase gpu \
    --verdicts "$LOGS/verdicts-fresh.json"
}

case "$SUB" in
  suite | trust | sanitizer | bench | startup | simulator | replay | scale | tune | speed | shards | phases | tier | seeds) run=$SUB ;;
  large-seeds) run=large_seeds ;;
  export) run=export_ ;;
  twin-cpu) run=twin_cpu ;;
  pytest) run=pytest_ ;;
  *)
    echo "usage: OUT=DIR bash scripts/gpu.sh pytest ARGS...|suite|trust|sanitizer|export|bench|startup|twin-cpu|simulator|replay|scale|tune|speed|shards|phases|tier|seeds|large-seeds" >&2
    exit 2
    ;;
esac
rm -rf "$LOGS"
mkdir -p "$LOGS"
machine
"$run"
{
  echo "# scripts/gpu.sh $SUB, $(grep -m1 "^gpu:" "$LOGS/machine.txt")"
  echo "| step                       | exit |     s | last line |"
  echo "|---|---|---|---|"
  printf '%s\n' "${ROWS[@]}"
} > "$OUT/$SUB-summary.txt"
tar czf "$OUT/$SUB.tgz" -C "$OUT" "$SUB" && rm -rf "$LOGS"
cat "$OUT/$SUB-summary.txt"
failed=$(printf '%s\n' "${ROWS[@]}" | awk -F'|' '$3 + 0 != 0' | wc -l)
exit $((failed > 0))
