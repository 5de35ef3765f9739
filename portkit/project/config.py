"""Where a project's ops live, read once from its pyproject.toml.

A project is the nearest folder, from the working directory up, that holds a
``pyproject.toml``. Its ``[tool.portkit]`` table may set:

    prototypes = "prototypes"   # folder of numba prototypes, one op per <op>.py
    cuda-src   = "cuda_src"     # folder of C CUDA twins, one op per <op>.cu
    cache-dir  = "..."          # compiled twins and prototypes; default: $XDG_CACHE_HOME/portkit
                                # (one that cannot be written is said once; no cache then)
    namespace  = "portkit"      # torch.library namespace of the registered ops
    lint-warnings = "warning"   # "error": lint warnings fail lint, check and pytest too
    sim-budget = 300            # seconds one simulated launch may run (0: no limit)
    strict     = false          # simulator warnings are errors (docs/simulator.md)
    archs      = ["sm_90"]      # twins compiled for each by `portkit check` (NVRTC, no GPU)
    lockstep-fallback = "allow" # "error": a launch the lockstep engine hands to the
                                # per-thread engine fails (CI); PORTKIT_LOCKSTEP_FALLBACK wins
    backends = ["pkg.module:Cls"] # third-party backends, run with the built-ins
                                # (docs/add-a-backend.md)

Nothing is read at import time: a ``Session`` (project/session.py) calls ``load_config``
and adds the ``Settings`` it read from the environment; a config from ``load_config`` alone
carries the default settings.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from portkit.cache_files import usable_folder
from portkit.errors import ConfigError
from portkit.project.environment import Settings, tool_path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

_KNOWN_KEYS = {
    "archs",
    "prototypes",
    "cuda-src",
    "cache-dir",
    "namespace",
    "lint-warnings",
    "sim-budget",
    "strict",
    "lockstep-fallback",
    "backends",
}
LINT_WARNINGS = ("warning", "error")  # what a lint warning is to lint, check and pytest
DEFAULT_NAMESPACE = "portkit"
# Seconds one simulated launch may run before it is stopped as spinning: GPU-sized
# cases take 5-80 s on a CPU (docs/scale.md); a loop that never ends takes forever.
DEFAULT_SIM_BUDGET = 300.0


@dataclass(frozen=True)
class ProjectConfig:
    root: Path
    prototypes_dir: Path
    cuda_src_dir: Path
    cache_dir: Path
    namespace: str = DEFAULT_NAMESPACE  # ops register as torch.ops.<namespace>.<op>_<impl>
    lint_warnings_fail: bool = False  # lint-warnings = "error"
    configured: bool = False  # pyproject.toml has a [tool.portkit] table
    sim_budget: float = DEFAULT_SIM_BUDGET  # seconds per simulated launch; 0: no limit
    # Simulator warnings (what the CUDA C++ guide leaves undefined but GPUs run right,
    # simt/warning_log.py) are errors: strict = true, or --strict.
    strict: bool = False
    lockstep_fallback: str = "allow"  # "error": a per-thread fallback fails the launch
    # The folder keys pyproject.toml sets ("prototypes", "cuda-src"): a folder named there
    # must exist (a typo would otherwise drop every op or twin without a word).
    set_folders: tuple[str, ...] = ()
    # GPU architectures the project ships for ([tool.portkit] archs): the twin compile
    # checks run for each (NVRTC needs no GPU); empty: sm_90 alone.
    archs: tuple[str, ...] = ()
    # The session's switches (prototype cache, simulator engine...), passed down with the
    # configuration so that nothing below the session reads the environment.
    settings: Settings = field(default_factory=Settings)
    # Third-party backends, "package.module:BackendClass" (portkit/backends/plugins.py).
    backends: tuple[str, ...] = ()


def default_cache_dir() -> Path:
    base = tool_path("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "portkit"


def _cache_setting(pyproject: Path, configured: str | None) -> str:
    """What chose the cache folder, as the user would change it."""
    if configured:
        return f"set by [tool.portkit] cache-dir in {pyproject}"
    if tool_path("XDG_CACHE_HOME"):
        return "set by XDG_CACHE_HOME"
    return "the default; [tool.portkit] cache-dir or XDG_CACHE_HOME moves it"


def find_project_root(start: Path) -> Path:
    """The nearest folder at or above ``start`` with a pyproject.toml, else ``start``."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / "pyproject.toml").is_file():
            return folder
    return start


def load_config(start: Path | None = None) -> ProjectConfig:
    root = find_project_root(start or Path.cwd())
    table: dict = {}
    configured = False
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{pyproject}: not valid TOML: {exc}") from None
        table = data.get("tool", {}).get("portkit", {})
        configured = "portkit" in data.get("tool", {})
    unknown = sorted(set(table) - _KNOWN_KEYS)
    if unknown:
        raise ConfigError(
            f"{pyproject}: unknown key(s) in [tool.portkit]: {', '.join(unknown)}; "
            f"known keys: {', '.join(sorted(_KNOWN_KEYS))}"
        )
    budget = table.pop("sim-budget", DEFAULT_SIM_BUDGET)
    if (
        isinstance(budget, bool)
        or not isinstance(budget, (int, float))
        or not 0 <= budget < float("inf")
    ):
        raise ConfigError(
            f"{pyproject}: [tool.portkit] sim-budget must be a number of seconds >= 0 "
            f"(0: no limit), got {budget!r}"
        )
    backends = table.pop("backends", [])
    if not isinstance(backends, list) or not all(
        isinstance(b, str) and b.count(":") == 1 for b in backends
    ):
        raise ConfigError(
            f'{pyproject}: [tool.portkit] backends must be a list of "package.module:Class" '
            f"strings, got {backends!r}"
        )
    strict = table.pop("strict", False)
    if not isinstance(strict, bool):
        raise ConfigError(
            f"{pyproject}: [tool.portkit] strict must be true or false, got {strict!r}"
        )
    archs = table.pop("archs", [])
    if not isinstance(archs, list) or not all(_is_arch(a) for a in archs):
        raise ConfigError(
            f'{pyproject}: [tool.portkit] archs must be a list like ["sm_80", "sm_90"], '
            f"got {archs!r}"
        )
    for key, value in table.items():
        if not isinstance(value, str):
            words = ("namespace", "lint-warnings", "lockstep-fallback")
            what = "a string" if key in words else "a string path"
            raise ConfigError(f"{pyproject}: [tool.portkit] {key} must be {what}")
    namespace = table.get("namespace", DEFAULT_NAMESPACE)
    if not namespace.isidentifier():
        raise ConfigError(
            f"{pyproject}: [tool.portkit] namespace {namespace!r} must be a Python identifier "
            f"(ops register as torch.ops.<namespace>.<op>)"
        )
    lint_warnings = table.get("lint-warnings", "warning")
    if lint_warnings not in LINT_WARNINGS:
        raise ConfigError(
            f'{pyproject}: [tool.portkit] lint-warnings must be "warning" or "error", '
            f"not {lint_warnings!r}"
        )
    fallback = table.get("lockstep-fallback", "allow")
    if fallback not in ("allow", "error"):
        raise ConfigError(
            f'{pyproject}: [tool.portkit] lockstep-fallback must be "allow" or "error", '
            f"not {fallback!r}"
        )
    cache = table.get("cache-dir")
    cache_dir = (root / cache) if cache else default_cache_dir()
    return ProjectConfig(
        root=root,
        prototypes_dir=root / table.get("prototypes", "prototypes"),
        cuda_src_dir=root / table.get("cuda-src", "cuda_src"),
        # A folder that cannot be used is said once; commands then run without a cache.
        cache_dir=usable_folder(cache_dir, _cache_setting(pyproject, cache)),
        namespace=namespace,
        lint_warnings_fail=lint_warnings == "error",
        configured=configured,
        sim_budget=float(budget),
        strict=strict,
        lockstep_fallback=fallback,
        set_folders=tuple(k for k in ("prototypes", "cuda-src") if k in table),
        backends=tuple(backends),
        archs=tuple(dict.fromkeys(archs)),
    )


def _is_arch(value: object) -> bool:
    """"sm_90", "sm_100a": what NVRTC's --gpu-architecture takes for a cubin."""
    if not isinstance(value, str) or not value.startswith("sm_"):
        return False
    digits = value[3:].rstrip("af")
    return digits.isdigit() and len(value) - 3 - len(digits) <= 1
