# Sourced by the GPU scripts: output folder, the machine's Python with the carried NumPy
# wheels (numba-cuda 0.30 needs NumPy < 2.5) in a private folder, a fresh twin cache,
# and a versions.txt naming the GPU and every package version.
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if compgen -G ".whl/*.whl" >/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/portkit-site .whl/*.whl
  export PYTHONPATH="/tmp/portkit-site:$PYTHONPATH"
fi
# A fresh twin cache, so the run also measures cold compiles.
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-/tmp/portkit-gpu-cache}

{
  date -u +"date: %Y-%m-%dT%H:%MZ"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | sed 's/^/gpu: /'
  "$PY" - <<'PY'
import platform, numpy, numba, torch, click, rich, pytest
from importlib.metadata import version
print("python:", platform.python_version())
for name in ("torch", "numba", "numba-cuda", "numpy", "cuda-core", "cuda-bindings", "click", "rich", "pytest"):
    print(f"{name}: {version(name)}")
print("torch cuda:", torch.version.cuda, "device:", torch.cuda.get_device_name(0))
PY
} | tee "$OUT/versions.txt"

