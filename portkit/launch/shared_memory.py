"""A block's shared memory as a GPU takes it: static arrays (``cuda.shared.array``,
``__shared__``) up to 48 KiB, which is all ptxas accepts without opt-in (its "too much
shared data (0x61a80 bytes, 0xc000 max)" is what `portkit lint` reports), and static
plus dynamic up to the opt-in maximum. The simulator checks every block against it
before allocating an array, so a shared array of gigabytes is one line, not an exhausted
host, and a kernel lint rejects does not pass `sim` and `check`."""

from __future__ import annotations

from portkit.runtime.launch_contract import INVALID_LAUNCH, MAX_SHARED_BYTES, LaunchError

MAX_STATIC_SHARED_BYTES = 48 * 1024


def check_shared_bytes(static: int, dynamic: int) -> None:
    """Raise ``LaunchError`` for a block with ``static`` bytes of static shared arrays
    (so far) and ``dynamic`` bytes of dynamic shared memory that a GPU would refuse."""
    if static > MAX_STATIC_SHARED_BYTES:
        raise LaunchError(
            f"{static} bytes of static shared memory per block; a GPU allows "
            f"{MAX_STATIC_SHARED_BYTES} (48 KiB) without opt-in and ptxas rejects the kernel "
            f"(`portkit lint` reports it); use dynamic shared memory (k.kernel[grid, block, "
            f"shared_bytes]) for more"
        )
    if static + dynamic > MAX_SHARED_BYTES:
        raise LaunchError(
            f"{static} bytes of static and {dynamic} of dynamic shared memory per block; "
            f"a GPU allows {MAX_SHARED_BYTES} in all ({INVALID_LAUNCH} on a GPU)"
        )
