"""Where a replayed call of the twin's sigmoid goes (a diagnostic for the GPU machine)."""

import torch

import portkit

f = portkit.load("sigmoid", "twin")
x = torch.randn(1024, device="cuda")
y = f(x)
forward = f.binding.forward
print("replayer", type(forward.replayer).__name__, len(forward.replayer), forward.unreplayable)
print("recorded", forward.recorded, "alive", list(getattr(forward.replayer, "_alive", {})))
print("key now ", forward.replayer.key((x,)))
print("run", forward.replayer.run((x,)) is not None)
f(x)
f(x)
print("recorded after two more calls", forward.recorded)
