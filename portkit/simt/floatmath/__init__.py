"""One float semantics for the simulator and the CPU twin (``portkit_math.h``)."""

from portkit.simt.floatmath.library import ARITY, SOURCE_DIR, compute, loaded

__all__ = ["ARITY", "SOURCE_DIR", "compute", "loaded"]
