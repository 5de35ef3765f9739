#!/usr/bin/env bash
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl; export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
# Issue 13 on a GPU machine (about 4-5 minutes, at most 350 s of timeouts): launch overhead (torch vs twin vs numba), the twin as a
# registered op (opcheck per op and case, torch.compile fullgraph, CUDA graphs), and an
# exported package installed in a fresh venv, run with portkit and numba blocked, and
# compared with the twin. Writes at most 7 files to $OUT; a summary table comes last.
#
#   OUT=/some/folder scripts/gpu-production.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export XDG_CACHE_HOME=/tmp/portkit-production-cache
PY=python3
{
  date -u +"date: %Y-%m-%dT%H:%MZ"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sed 's/^/gpu: /'
  $PY -c "import torch, numba, importlib.metadata as m; print('torch', torch.__version__, 'numba-cuda', m.version('numba-cuda'), 'cuda-core', m.version('cuda-core'), 'cuda-bindings', m.version('cuda-bindings'))"
} > "$OUT/versions.txt" 2>&1
cat "$OUT/versions.txt"

# 1. Host cost per call.
timeout 240 $PY scripts/bench_launch.py --json "$OUT/bench_launch.json" > "$OUT/bench_launch.txt" 2>&1
bench=$?
cat "$OUT/bench_launch.txt"

# 2. Registered op tests (CPU ones and the gpu-marked ones).
# The plugin registers the gpu marker; load it by name only where no entry point does.
plugin=(-p portkit.pytest_plugin)
if $PY -c "import sys, importlib.metadata as m; sys.exit(not any(e.name == 'portkit' for e in m.entry_points(group='pytest11')))"; then
  plugin=()
fi
parallel=(); $PY -c "import xdist" 2>/dev/null && parallel=(-n 4)
timeout 150 $PY -m pytest "${plugin[@]}" "${parallel[@]}" -q -rfs -p no:cacheprovider tests/torch_op \
  --junitxml="$OUT/junit-torch-op.xml" > "$OUT/pytest-torch-op.txt" 2>&1
tests=$?
tail -n 15 "$OUT/pytest-torch-op.txt"

# 3. Export, install into a fresh venv, run there without portkit/numba, compare with the twin.
export_install_run() {
  rm -rf /tmp/pk-export /tmp/pk-venv /tmp/pk-target /tmp/pk-exported.pt
  python3 -m portkit.cli export sigmoid elementwise_mul vector_add softmax softmax_warp \
    --out /tmp/pk-export --arch sm_80,sm_90,sm_100 --name pk_exported || return 1
  local wheel=(/tmp/pk-export/dist/*.whl) run=()
  # A venv sees the base interpreter's packages; where python3 is itself a venv (torch
  # lives in it), the fresh one has no torch: install beside instead.
  if python3 -m venv --system-site-packages /tmp/pk-venv \
    && /tmp/pk-venv/bin/python -c "import torch" 2>/dev/null; then
    /tmp/pk-venv/bin/python -m pip install -q --no-index --no-deps "${wheel[@]}" || return 1
    run=(env -u PYTHONPATH /tmp/pk-venv/bin/python)
  else  # no ensurepip on this image: install beside, still outside the repository
    echo "no venv with torch here: pip install --target /tmp/pk-target instead"
    python3 -m pip install -q --no-index --no-deps --target /tmp/pk-target "${wheel[@]}" || return 1
    run=(env PYTHONPATH=/tmp/pk-target python3)
  fi
  (cd /tmp && "${run[@]}" "$REPO/scripts/check_exported.py" run pk_exported /tmp/pk-exported.pt) \
    || return 1
  python3 scripts/check_exported.py compare /tmp/pk-exported.pt
}
export REPO=$PWD
export -f export_install_run
timeout 120 bash -c export_install_run > "$OUT/export.txt" 2>&1
exported=$?
tail -n 14 "$OUT/export.txt"

{
  echo
  echo "== summary (issue 13) =="
  $PY - "$OUT" "$bench" "$tests" "$exported" <<'PY'
import json, re, sys, pathlib
out, bench, tests, exported = sys.argv[1], *map(int, sys.argv[2:])
try:
    rows = json.loads(pathlib.Path(out, "bench_launch.json").read_text())["rows"]
    for r in rows:
        print(f"{r['impl']:32} fwd {r['forward_us']:6.1f} us  fwd+bwd {r['forward_backward_us']:7.1f} us  x torch {r['fwd_bwd_vs_torch']:.2f}")
except Exception as exc:
    print("bench: no result", exc)
text = pathlib.Path(out, "pytest-torch-op.txt").read_text()
last = [l for l in text.splitlines() if re.search(r"passed|failed|error", l)]
print("torch_op tests:", last[-1] if last else "no summary", "(rc", tests, ")")
print("bench rc", bench, "| export+install+compare rc", exported)
PY
} | tee "$OUT/summary.txt"
