"""The lockstep engine: a kernel run as NumPy arrays over threads.

Every per-thread value is an array with one element per simulated thread (a *lane*);
divergent ``if``/``while``/``for`` become masks, loads and stores checked gathers and
scatters, barriers and warp operations whole-array steps. Blocks run together, as many
whole blocks at a time as fit in a chunk of lanes.

It does not report faults itself. It only has to notice that *something* went wrong
(a bound, a race, an uninitialised read, a divergent barrier, a bad warp mask, or a
construct it cannot vectorise); the machine then restores the launch's inputs and runs
it again in the per-thread engine, which names the exact thread, line and other
thread. So the lockstep checks may be stricter than the per-thread ones (a false alarm
only costs a re-run), never laxer.
"""

from portkit.simt.lockstep.engine import LockstepEngine, Unsupported
from portkit.simt.lockstep.lane_shadow import LaneShadow

__all__ = ["LaneShadow", "LockstepEngine", "Unsupported"]
