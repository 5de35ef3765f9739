"""Does the op compile for a real GPU? Checked on a machine with none.

The simulator runs any Python, so a prototype can pass there and still fail to
compile for a GPU. This module runs each op's launchers on CPU tensors with kernels
that only record their argument types, then compiles every kernel with those types
for sm_90 through numba's ``compile_ptx``, and every twin through NVRTC.

A signature that compiled is remembered on disk (its PTX, under the prototype cache's
content key: backends/ptx.py, shared with the simulator's type check before a launch),
so an unchanged op is not compiled again in the next process; a failure is never
remembered.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from portkit.backends.ptx import ARCH, ptx_cache_folder, signature_ptx
from portkit.backends.twin.build import DEFAULT_ARCH, compile_twin
from portkit.errors import DtypeError, LauncherError, PortkitError, failure_site
from portkit.launch.trace import launch_signatures
from portkit.results import CheckResult, Outcome, Stage, compile_check

if TYPE_CHECKING:
    from portkit.project.config import ProjectConfig
    from portkit.project.discovery import Op

COMPILE, STATIC = Stage.COMPILE, Stage.STATIC  # the stages of the rows built here


def signatures_by_dtype(op: Op) -> dict[str, dict[str, tuple]]:
    """Each kernel's argument types in one case of each dtype (launch/trace.py)."""
    return {dtype: launch_signatures(op, dtype) for dtype in op.definition.dtypes}


def mlir_reason(op: Op) -> str | None:
    """Why the op's prototype is neither compiled nor linted here, or None."""
    from portkit.simt.mlir_names import NOT_COMPILED, mlir_kernel_names

    names = mlir_kernel_names(op)
    return (
        f"{', '.join(names)} {'is' if len(names) == 1 else 'are'} {NOT_COMPILED}" if names else None
    )


def check_prototype(op: Op, config: ProjectConfig | None = None) -> CheckResult:
    """Compile every launched signature to PTX; with ``config``, through the disk cache."""
    t0 = time.perf_counter()
    check = compile_check(ARCH)
    mlir_skip = mlir_reason(op)
    if mlir_skip:
        return CheckResult(op.name, "all", "numba", check, Outcome.SKIP, mlir_skip, stage=COMPILE)
    signatures: dict[str, set] = {name: set() for name in op.kernels}
    try:
        for kernels in signatures_by_dtype(op).values():
            for kernel, signature in kernels.items():
                signatures[kernel].add(signature)
    except LauncherError as exc:
        return CheckResult(
            op.name, "all", "numba", check, Outcome.FAIL, str(exc), stage=COMPILE, site=exc.site
        )
    except Exception as exc:
        detail = f"tracing the launchers failed: {type(exc).__name__}: {exc}"
        return CheckResult(op.name, "all", "numba", check, Outcome.FAIL, detail, stage=COMPILE)
    folder = ptx_cache_folder(op, config)
    compiled, cached, problems = 0, 0, []
    for name, sigs in signatures.items():
        if not sigs:
            problems.append(f"kernel {name} is never launched by the op's cases")
        for sig in sorted(sigs, key=str):
            try:
                _, from_cache = signature_ptx(op.kernels[name], folder, name, sig)
                compiled, cached = compiled + 1, cached + from_cache
            except Exception as exc:
                first = str(exc).strip().splitlines()
                problems.append(
                    f"kernel {name}{tuple(str(t) for t in sig)}: {type(exc).__name__}: "
                    + "\n".join(first[:12])
                )
    status = Outcome.FAIL if problems else Outcome.PASS
    cache_note = f" ({cached} from the prototype cache)" if cached else ""
    detail = "\n".join(problems) or f"{compiled} kernel signature(s) compiled to PTX{cache_note}"
    seconds = time.perf_counter() - t0
    return CheckResult(op.name, "all", "numba", check, status, detail, seconds, stage=COMPILE)


def lineinfo_ptx(op: Op, config: ProjectConfig | None, name: str, sig: tuple) -> str:
    """Kernel ``name``'s PTX for ``sig`` with ``.loc`` line info, through the PTX cache."""
    folder = ptx_cache_folder(op, config)
    return signature_ptx(op.kernels[name], folder, name, sig, lineinfo=True)[0]


def check_twin(op: Op, config: ProjectConfig, arch: str = DEFAULT_ARCH) -> CheckResult | None:
    from portkit.backends.twin.build import nvrtc_syntax_check
    from portkit.backends.twin.instances import readable_twin

    if not op.has_twin:
        return None
    t0, check = time.perf_counter(), compile_check(arch)
    try:
        _, expressions = readable_twin(op, lambda path: nvrtc_syntax_check(path, arch))
        assert op.twin_path is not None
        compiled = compile_twin(op.twin_path, expressions, config.cache_dir, arch)
    except DtypeError:
        raise  # the op's dtypes and its twin disagree: a contract error, exit 2
    except PortkitError as exc:
        detail, site = str(exc), failure_site(exc)
        return CheckResult(
            op.name, "all", "twin", check, Outcome.FAIL, detail, stage=COMPILE, site=site
        )
    source = "cache" if compiled.from_cache else "NVRTC"
    detail = f"{len(expressions)} kernel instantiation(s), cubin from {source}"
    seconds = time.perf_counter() - t0
    return CheckResult(op.name, "all", "twin", check, Outcome.PASS, detail, seconds, stage=COMPILE)


def check_signature(op: Op) -> CheckResult:
    """Do the twin's kernels take what the launcher passes (signature.py)? Fails on
    the errors; the warnings are the lint's."""
    from portkit.build.finding import Severity
    from portkit.build.signature import signature_findings

    t0 = time.perf_counter()
    try:
        findings = signature_findings(op)
    except LauncherError as exc:  # the launcher's bug: this op's red row, not the run's end
        seconds = time.perf_counter() - t0
        return CheckResult(
            op.name, "all", "twin", "signature", Outcome.FAIL, str(exc), seconds,
            stage=STATIC, site=exc.site,
        )  # fmt: skip
    errors = [f for f in findings if f.severity is Severity.ERROR]
    detail = "\n".join(f.line() for f in errors) or "twin parameters match every launch"
    seconds = time.perf_counter() - t0
    status = Outcome.FAIL if errors else Outcome.PASS
    return CheckResult(op.name, "all", "twin", "signature", status, detail, seconds, stage=STATIC)


def compile_checks(op: Op, config: ProjectConfig) -> list[CheckResult]:
    """The prototype's PTX for sm_90, the twin for each of the project's archs
    ([tool.portkit] archs; sm_90 alone by default), and the twin's signature."""
    results = [check_prototype(op, config)]
    twins = [check_twin(op, config, arch) for arch in config.archs or (DEFAULT_ARCH,)]
    compiled = [t for t in twins if t is not None]
    results += compiled
    if compiled and not any(t.failed for t in compiled):
        results.append(check_signature(op))
    return results
