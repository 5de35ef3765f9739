"""Every private torch name portkit and an exported package use, wrapped once.

PyTorch may rename or drop any of these in a release; here is the one place to look
when it does (tests/test_architecture.py fails on a private torch name anywhere else in
portkit/). The torch versions they are tested on are pinned in pyproject.toml.
Each name is bound once, at import, to the object itself: the callers run on every
launch or every op call, where a wrapping Python frame would cost more than the call.

- The watch questions an op asks before its plain-eager fast path: is a dispatch mode,
  a function mode or a functorch transform active (registration.py, prepared.py, the
  compiled replayer).
- The Autograd kernel's descent below autograd (registration.py).
- The CUDA state read without building Python objects: the current device (the launch
  contract's ``sm_count``) and the current raw stream (driver_launch.py).
- torch's C++ launcher of inductor's cubins (driver_launch.py), where this torch has it.
- ``TorchDispatchMode``, which the recorder watches a launcher with (recorder.py).
- functorch's configuration (the bench turns donated buffers off) and dynamo's (the
  bench compiles a reference once per shape, past dynamo's default of 8 entries).
- The folder torch's C++ extension builder builds an extension in (native_replayer.py
  loads a finished build from there without running ninja).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode as TorchDispatchMode

# -- is PyTorch watching? ---------------------------------------------------------------
dispatch_mode_count: Callable[[], int] = torch._C._len_torch_dispatch_stack
function_mode_enabled: Callable[[], bool] = torch._C._is_torch_function_mode_enabled
functorch_level: Callable[[], Any] = torch._C._functorch.peek_interpreter_stack

# -- below autograd ---------------------------------------------------------------------
AutoDispatchBelowAutograd: Any = torch._C._AutoDispatchBelowAutograd
AFTER_AUTOGRAD_KEYSET: Any = torch._C._after_autograd_keyset


# -- CUDA state -------------------------------------------------------------------------
def cuda_current_device() -> Callable[[], int]:
    """The current CUDA device without ``torch.cuda.current_device()``'s lazy-init check
    (call ``torch.cuda.init()`` first)."""
    getter: Callable[[], int] = torch._C._cuda_getDevice
    return getter


def current_raw_stream() -> Callable[[int], int] | None:
    """torch's current stream on a device as a raw handle (Triton reads it the same way),
    or None where this torch has no such function."""
    return getattr(torch._C, "_cuda_getCurrentRawStream", None)


def static_cuda_launcher() -> Any:
    """torch's C++ launcher of inductor's cubins (``_StaticCudaLauncher._launch_kernel``),
    or None where this torch has none (CPU builds, older releases)."""
    launcher = getattr(torch._C, "_StaticCudaLauncher", None)
    return getattr(launcher, "_launch_kernel", None)


# -- configuration ------------------------------------------------------------------------
def functorch_config() -> Any:
    """``torch._functorch.config`` (AOTAutograd's switches), imported when asked for."""
    import torch._functorch.config as config

    return config


def dynamo_config() -> Any:
    """``torch._dynamo.config`` (dynamo's recompile limit), imported when asked for."""
    import torch._dynamo.config as config

    return config


def cuda_sleep(cycles: int) -> None:
    """Keep the current stream busy for about ``cycles`` GPU clock cycles (the bench
    covers its host-side launch overhead with it)."""
    torch.cuda._sleep(cycles)


def cpp_extension_folder(name: str) -> Path:
    """Where ``torch.utils.cpp_extension.load(name, ...)`` builds (``TORCH_EXTENSIONS_DIR``
    or torch's default, per Python version and CUDA/CPU build), made if missing."""
    from torch.utils import cpp_extension

    return Path(cpp_extension._get_build_directory(name, verbose=False))
