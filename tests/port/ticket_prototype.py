"""An op of constructs the example ops do not use: a nested ternary, a while loop of
warp shuffles, and an atomic whose return value is used (each thread takes a ticket
and marks it: every ticket 0..n-1 is marked once, whatever the order)."""

import torch
from numba import cuda, float32

import portkit

THREADS = 64
FULL = 0xFFFFFFFF
LIMIT = 1.5


@cuda.jit
def ticket(x, y, warp_sums, tickets, counter, n, limit):
    i = cuda.grid(1)
    v = x[i] if i < n else float32(0)
    c = limit if v > limit else (-limit if v < -limit else v)
    if i < n:
        y[i] = c
    s = c
    offset = 16
    while offset > 0:
        s += cuda.shfl_down_sync(FULL, s, offset)
        offset //= 2
    if i % 32 == 0 and i < n:
        warp_sums[i // 32] = s
    if i < n:
        t = cuda.atomic.add(counter, 0, 1)
        tickets[t] = 1


def reference(x):
    clamped = x.double().clamp(-LIMIT, LIMIT)
    n = x.numel()
    padded = torch.zeros(portkit.cdiv(n, 32) * 32, dtype=torch.float64)
    padded[:n] = clamped
    sums = padded.reshape(-1, 32).sum(dim=1)
    return clamped.to(x.dtype), sums.to(x.dtype), torch.ones(n, dtype=torch.int32)


@portkit.op(
    reference=reference,
    cases=[
        portkit.cases.custom(f"{dt}-n{n}", [(n,)], dt, seed=i)
        for dt in ("float32", "float64")
        for i, n in enumerate((1, 100, 129))
    ],
)
class Ticket:
    def forward(k, x):
        n = x.numel()
        y = k.empty_like(x)
        sums = k.empty((portkit.cdiv(n, 32),), x.dtype)
        tickets = k.empty((n,), torch.int32)
        counter = torch.zeros(1, dtype=torch.int32, device=x.device)
        k.ticket[portkit.cdiv(n, THREADS), THREADS](x, y, sums, tickets, counter, n, LIMIT)
        return (y, sums, tickets), ()
