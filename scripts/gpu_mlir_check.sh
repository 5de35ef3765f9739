#!/usr/bin/env bash
# numba-cuda-mlir prototypes on a GPU machine, run from the repository root:
#
#   OUT=/some/folder bash scripts/gpu_mlir_check.sh
#
# For a GPU machine without numba-cuda-mlir and without network: put NumPy 2.4.6's cp312
# wheel and numba-cuda-mlir 0.6.0's cp312 manylinux wheel in .whl-mlir/ first, the latter
# as a .tar.xz of the wheel's files (71 MB as a wheel, 47 MB compressed); the wheel is
# rebuilt here and both are installed with pip into /tmp/site. Its other dependencies
# (cuda-bindings 13, cuda-core) are on the machine already.
#
# Steps: the GPU tests of numba-cuda-mlir prototypes (tests/cli/test_mlir_prototypes.py,
# tests/simt/test_dropin_mlir.py), then `portkit check`, `diff` and `bench` of the example
# op tests/fixtures/mlir_project (prototypes/mlir_axpb.py, written against
# numba-cuda-mlir, and its twin). Logs in $OUT/mlir/, the table of steps printed last.
cd "$(dirname "$0")/.." || exit 2
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
LOGS=$OUT/mlir
PY=${PYTHON:-python3}
mkdir -p "$LOGS"
export PYTHONUNBUFFERED=1 COLUMNS=200
export XDG_CACHE_HOME=/tmp/portkit-gpu-cache-mlir-$$

# Rebuild the wheel from its files (stored, not compressed: it is installed at once).
WHEELS=/tmp/mlir-wheels
rm -rf "$WHEELS" && mkdir -p "$WHEELS"
cp .whl-mlir/*.whl "$WHEELS"/
"$PY" - "$WHEELS" .whl-mlir/numba_cuda_mlir-*.tar.xz <<'EOF' || exit 2
import sys, tarfile, zipfile
from pathlib import Path

folder, archive = Path(sys.argv[1]), Path(sys.argv[2])
wheel = folder / (archive.name.removesuffix(".tar.xz") + ".whl")
with tarfile.open(archive) as tar, zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as out:
    for member in tar:
        if member.isfile():
            out.writestr(member.name.removeprefix("./"), tar.extractfile(member).read())
print(wheel)
EOF
"$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
  "$WHEELS"/*.whl || exit 2
export PYTHONPATH=/tmp/site:$PWD

PLUGIN=(-p portkit.pytest_plugin)
if "$PY" -c "import sys, importlib.metadata as m; sys.exit(not any(e.name == 'portkit' for e in m.entry_points(group='pytest11')))"; then
  PLUGIN=()
fi
PYTEST=("$PY" -m pytest "${PLUGIN[@]}" -q -rfEs -p no:cacheprovider -p no:xdist)
PORTKIT=("$PY" -m portkit.cli)
ROWS=()

step() {  # step NAME SECONDS COMMAND...: run it under a timeout, log and time it
  local name=$1 limit=$2; shift 2
  local start=$SECONDS
  timeout "$limit" "$@" > "$LOGS/$name.txt" 2>&1
  local rc=$?
  local last
  last=$(grep -v '^\s*$' "$LOGS/$name.txt" | tail -n 1 | cut -c1-110)
  ROWS+=("$(printf '| %-14s | %4s | %5s | %s |' "$name" "$rc" "$((SECONDS - start))" "$last")")
}

step versions 120 "$PY" -c "import numpy, numba_cuda_mlir, torch; from numba_cuda_mlir import cuda; print('numpy', numpy.__version__, 'numba-cuda-mlir', numba_cuda_mlir.__version__, 'torch', torch.__version__, 'mlir sees a GPU:', cuda.is_available())"
step tests 420 "${PYTEST[@]}" tests/cli/test_mlir_prototypes.py tests/simt/test_dropin_mlir.py
PROJECT=/tmp/mlir_project
rm -rf "$PROJECT" && cp -r tests/fixtures/mlir_project "$PROJECT"
step check 300 bash -c "cd $PROJECT && ${PORTKIT[*]} check mlir_axpb"
step diff 300 bash -c "cd $PROJECT && ${PORTKIT[*]} diff mlir_axpb"
step bench 300 bash -c "cd $PROJECT && ${PORTKIT[*]} bench mlir_axpb"

printf '| %-14s | %4s | %5s | %s |\n' step rc s "last line"
printf '%s\n' "${ROWS[@]}" | tee "$LOGS/summary.txt"
