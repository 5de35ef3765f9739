"""Every environment variable portkit reads, in one table, and the settings they make.

``Settings.from_environment()`` is where portkit's own switches (``PORTKIT_*``) are read;
``Session.from_environment`` (project/session.py) calls it once and the layers below get
the values as arguments, never from ``os.environ``. ``tool_path`` reads the variables that
locate tools (a cache folder, a compiler, the CUDA toolkit) through the same table.
docs/environment.md renders ``VARIABLES``; tests/project/test_environment.py keeps the two
and the code in step.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from portkit.errors import ConfigError
from portkit.runtime.replay_setting import replay_mode

# Simulator engines (simt/machine.py), replay modes (runtime/replaying.py) and math libraries
# (simt/floatmath): the values the switches take.
SIMT_ENGINES = ("auto", "lockstep", "per-thread")
REPLAY_MODES = ("auto", "python", "off")  # auto: compiled where it builds, else Python
SIM_MATHS = ("library", "numpy")
LOCKSTEP_FALLBACKS = ("", "allow", "error")  # "": the project's lockstep-fallback
_OFF = ("0", "false", "no", "off")


@dataclass(frozen=True)
class Variable:
    name: str
    default: str
    meaning: str
    kind: str  # "setting": a portkit switch; "tool": finds a tool; "process": process setup


VARIABLES: tuple[Variable, ...] = (
    Variable(
        "PORTKIT_PROTOTYPE_CACHE",
        "1",
        "0 turns the on-disk cache of compiled prototypes, PTX and lint findings off "
        "(as `portkit check --no-cache` does)",
        "setting",
    ),
    Variable(
        "PORTKIT_VERDICT_CACHE",
        "1",
        "0: `portkit check` and the pytest plugin neither reuse nor record passing verdicts "
        "(as `--no-cache` / `--portkit-no-cache` do; docs/verdict-cache.md)",
        "setting",
    ),
    Variable(
        "PORTKIT_SIMT_ENGINE",
        "auto",
        "the simulator's engine: auto, lockstep or per-thread (docs/simulator.md)",
        "setting",
    ),
    Variable(
        "PORTKIT_LOCKSTEP_FALLBACK",
        "",
        "error: a simulated launch that falls back from the lockstep engine to the "
        "per-thread engine fails (for CI); allow: it runs; unset: [tool.portkit] "
        "lockstep-fallback decides (default allow)",
        "setting",
    ),
    Variable(
        "PORTKIT_SIM_MATH",
        "",
        "numpy: the simulator computes math functions in NumPy (float64, rounded once) "
        "instead of portkit_math.h; read once per process, the library being loaded once",
        "setting",
    ),
    Variable(
        "PORTKIT_REPLAY",
        "",
        "0 (or false, no, off) turns launch replay off in `portkit.load` and in exported "
        "packages; python picks the Python replayer (docs/production.md)",
        "setting",
    ),
    Variable(
        "PORTKIT_PIN_GPUS",
        "1",
        "0 stops the pytest plugin giving each pytest-xdist worker a GPU of its own",
        "setting",
    ),
    Variable(
        "XDG_CACHE_HOME",
        "~/.cache",
        "the default cache folder is $XDG_CACHE_HOME/portkit ([tool.portkit] cache-dir wins)",
        "tool",
    ),
    Variable("CXX", "g++, clang++, c++", "the C++ compiler of twin-cpu and sim math", "tool"),
    Variable(
        "CUDA_HOME, CUDA_PATH",
        "/usr/local/cuda",
        "where compute-sanitizer is looked for when it is not on PATH",
        "tool",
    ),
    Variable(
        "CUDA_VISIBLE_DEVICES",
        "",
        "process setup: the pytest plugin sets it for each xdist worker (PORTKIT_PIN_GPUS), "
        "`portkit check -j N` for each of its workers (round robin over the GPUs it lists)",
        "process",
    ),
    Variable(
        "OMP_NUM_THREADS",
        "",
        "process setup: `portkit check -j N` sets it to cores / N for its workers unless "
        "set, and the pytest plugin to cores / workers for each xdist worker",
        "process",
    ),
    Variable(
        "CUDA_CACHE_DISABLE",
        "",
        "process setup: `portkit lint` and the test suite set it to 1 before CUDA loads, so "
        "ptxas reports resources",
        "process",
    ),
    Variable(
        "PYTEST_XDIST_WORKER",
        "",
        "process setup: read by the pytest plugin, which gives worker gwN a GPU of its own",
        "process",
    ),
    Variable(
        "PYTEST_ADDOPTS",
        "",
        "process setup: read by the pytest plugin, which leaves a --dist mode named there "
        "to xdist (else -n takes work stealing)",
        "process",
    ),
    Variable(
        "PYTEST_XDIST_WORKER_COUNT",
        "",
        "process setup: read by the pytest plugin, which gives each xdist worker its share "
        "of the cores (OMP_NUM_THREADS)",
        "process",
    ),
    Variable(
        "NUMBA_ENABLE_CUDASIM",
        "",
        "process setup: `pytest --portkit-simt` and `simulated_cuda()` set it to 1 while on "
        "(restored after), so child processes get numba's simulator",
        "process",
    ),
    Variable(
        "NUMBA_*",
        "",
        "numba's own settings; part of the lint findings' cache key",
        "process",
    ),
)

_BY_NAME = {v.name: v for v in VARIABLES}


def _read(name: str, environ: Mapping[str, str] | None = None) -> str:
    """A setting of the table as the environment has it, else its default."""
    return (os.environ if environ is None else environ).get(name, _BY_NAME[name].default).strip()


def sim_math(environ: Mapping[str, str] | None = None) -> str:
    """PORTKIT_SIM_MATH alone: the math library is loaded once per process, when the
    simulator first needs it, so this one switch is process-wide (simt/floatmath)."""
    return "numpy" if _read("PORTKIT_SIM_MATH", environ) == "numpy" else "library"


def _choice(name: str, value: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ConfigError(f"{name}={value!r} is not one of {', '.join(choices)}")
    return value


@dataclass(frozen=True)
class Settings:
    """portkit's switches; the defaults are what an empty environment gives."""

    prototype_cache: bool = True  # PORTKIT_PROTOTYPE_CACHE / --no-cache
    simt_engine: str = "auto"  # PORTKIT_SIMT_ENGINE
    sim_math: str = "library"  # PORTKIT_SIM_MATH
    replay: str = "auto"  # PORTKIT_REPLAY
    pin_gpus: bool = True  # PORTKIT_PIN_GPUS
    lockstep_fallback: str = ""  # PORTKIT_LOCKSTEP_FALLBACK; "": [tool.portkit]'s
    verdict_cache: bool = True  # PORTKIT_VERDICT_CACHE / --no-cache

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        replay = _read("PORTKIT_REPLAY", env).lower()
        return cls(
            prototype_cache=_read("PORTKIT_PROTOTYPE_CACHE", env).lower() not in _OFF,
            verdict_cache=_read("PORTKIT_VERDICT_CACHE", env).lower() not in _OFF,
            simt_engine=_choice(
                "PORTKIT_SIMT_ENGINE", _read("PORTKIT_SIMT_ENGINE", env) or "auto", SIMT_ENGINES
            ),
            lockstep_fallback=_choice(
                "PORTKIT_LOCKSTEP_FALLBACK",
                _read("PORTKIT_LOCKSTEP_FALLBACK", env).lower(),
                LOCKSTEP_FALLBACKS,
            ),
            sim_math=sim_math(env),
            replay=replay_mode(replay),
            pin_gpus=_read("PORTKIT_PIN_GPUS", env) != "0",
        )

    def changed(self, **values: Any) -> Settings:
        return replace(self, **values)

    def as_environment(self) -> dict[str, str]:
        """The variables that give a child process these settings (a sanitizer child)."""
        defaults = Settings()
        out = {}
        for field in fields(self):
            value = getattr(self, field.name)
            if value == getattr(defaults, field.name):
                continue
            name = _FIELD_VARIABLES[field.name]
            out[name] = ("1" if value else "0") if isinstance(value, bool) else str(value)
        return out


_FIELD_VARIABLES = {
    "prototype_cache": "PORTKIT_PROTOTYPE_CACHE",
    "verdict_cache": "PORTKIT_VERDICT_CACHE",
    "simt_engine": "PORTKIT_SIMT_ENGINE",
    "lockstep_fallback": "PORTKIT_LOCKSTEP_FALLBACK",
    "sim_math": "PORTKIT_SIM_MATH",
    "replay": "PORTKIT_REPLAY",
    "pin_gpus": "PORTKIT_PIN_GPUS",
}


def set_process_variable(name: str, value: str | None) -> str | None:
    """Set a process-setup variable of the table for this process and its children
    (None: remove it); returns its previous value (None where it was unset), to restore."""
    assert _BY_NAME[name].kind == "process", name
    previous = os.environ.get(name)
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
    return previous


def process_variable(name: str) -> str | None:
    """A process-setup variable of the table as this process has it (None: unset)."""
    assert _BY_NAME[name].kind == "process", name
    return os.environ.get(name)


def default_process_variable(name: str, value: str) -> None:
    """Set a process-setup variable of the table unless the process has it set already."""
    if process_variable(name) is None:
        set_process_variable(name, value)


def numba_variables() -> list[tuple[str, str]]:
    """numba's own settings (``NUMBA_*``) as this process has them, sorted: part of the
    lint findings' cache key, since they change what numba compiles."""
    return sorted((k, v) for k, v in os.environ.items() if k.startswith("NUMBA_"))


def child_environment(**changes: str | None) -> dict[str, str]:
    """This process's whole environment, for a child process, with ``changes`` applied
    (None removes a variable): the sanitizer's child, the CPU twin's check worker."""
    env = dict(os.environ)
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def tool_path(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """A tool-locating variable of the table (XDG_CACHE_HOME, CXX, CUDA_HOME...), or None
    where it is unset or empty."""
    assert any(name in v.name.split(", ") for v in VARIABLES if v.kind == "tool"), name
    value = (os.environ if environ is None else environ).get(name, "")
    return value or None
