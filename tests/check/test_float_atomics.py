"""An index_add op whose float atomics sum many contributions into a small output: the
prototype (simulator) and the twin (compiled for the CPU) sum in different orders and
differ by tens of ULPs, more than the twin tolerance. Those elements are compared with
the summation-order bound (check/order_bound.py), so the same inputs give the same
verdict every time, the report states the bound, and a wrong twin still fails."""

from __future__ import annotations

import json
import re

import pytest

from portkit.backends.twin_cpu.build import find_compiler

pytestmark = pytest.mark.skipif(find_compiler() is None, reason="no C++ compiler on this machine")

PROTOTYPE = """
import torch
from numba import cuda

import portkit

BINS, THREADS = 8, 128


@cuda.jit
def index_add(x, out, n, bins):
    i = cuda.grid(1)
    if i < n:
        cuda.atomic.add(out, i % bins, x[i])


def reference(x):
    index = torch.arange(x.numel(), device=x.device) % BINS
    return torch.zeros(BINS, dtype=x.dtype, device=x.device).index_add(0, index, x)


@portkit.op(
    reference=reference,
    cases=[portkit.cases.custom("float32-n4096", [(4096,)], "float32", seed=3)],
    dtypes=("float32",),
)
class IndexAdd:
    def forward(k, x):
        out = torch.zeros(BINS, dtype=x.dtype, device=x.device)
        n = x.numel()
        k.index_add[portkit.cdiv(n, THREADS), THREADS](x, out, n, BINS)
        return out, ()
"""

# The same contributions from the other end: another summation order, still correct.
TWIN = """
template <typename T>
__global__ void index_add(const T* __restrict__ x, T* __restrict__ out, long long n,
                          long long bins) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n%s) {
        long long j = n - 1 - i;
        atomicAdd(out + j %% bins, x[j]);
    }
}
"""
RIGHT, DROPS_ONE = TWIN % "", TWIN % " && i != 100"

LABEL = "output 0 (float atomics on 8 of 8 elements, up to 512 contributions)"


def _rows(result) -> dict[tuple[str, str], dict]:
    report = json.loads(result.output[result.output.index('{\n "results"') :])
    return {(r["backend"], r["check"]): r for r in report["results"]}


def test_order_dependent_sums_pass_every_time_and_state_their_bound(make_project, cli):
    root = make_project({"index_add": (PROTOTYPE, RIGHT)})
    args = ("check", "index_add", "--backend", "sim,torch,twin-cpu", "--no-compile", "--json")
    for _ in range(3):
        result = cli(root, *args)
        assert result.exit_code == 0, result.output
        rows = _rows(result)
        for key in (("sim", "forward"), ("twin-cpu", "forward"), ("sim", "vs twin-cpu")):
            assert rows[key]["status"] == "pass"
            assert rows[key]["detail"].startswith(f"{LABEL}: within the summation-order bound")
            assert ", bound " in rows[key]["detail"]
    # Without the bound the twin comparison fails: the two orders are far apart in ULPs.
    diff = cli(root, "diff", "index_add", "--json")
    assert diff.exit_code == 0, diff.output
    (tensor,) = json.loads(diff.output[diff.output.index("{") :])["cases"][0]["tensors"]
    assert tensor["max_ulp"] > 2 and tensor["mismatches"] == 0
    assert tensor["order_note"].startswith(LABEL)


def test_a_twin_that_drops_a_contribution_still_fails(make_project, cli):
    root = make_project({"index_add": (PROTOTYPE, DROPS_ONE)})
    args = ("check", "index_add", "--backend", "sim,torch,twin-cpu", "--no-compile", "--json")
    result = cli(root, *args)
    assert result.exit_code == 1, result.output
    rows = _rows(result)
    assert rows[("sim", "forward")]["status"] == "pass"
    for key in (("twin-cpu", "forward"), ("sim", "vs twin-cpu")):
        assert rows[key]["status"] == "fail"
        detail = rows[key]["detail"]
        assert detail.startswith(f"{LABEL}: 1 of 8 summed elements differ by more than")
        assert "[seed 3; reproduce: portkit check index_add --case float32-n4096]" in detail


def test_the_sim_row_says_whether_the_reversed_schedule_gives_the_same_bits(make_project, cli):
    root = make_project({"index_add": (PROTOTYPE, RIGHT)})
    result = cli(root, "check", "index_add", "--backend", "sim,torch", "--no-compile", "--json")
    assert result.exit_code == 0, result.output
    detail = _rows(result)[("sim", "forward")]["detail"]
    assert detail.startswith(f"{LABEL}: within the summation-order bound")
    assert re.search(
        r"\noutput 0: order-dependent: the reversed schedule differs by up to "
        r"\d\.\de[-+]\d\d \(bound \d\.\de[-+]\d\d\)$",
        detail,
    ), detail


# Only the first thread to arrive adds its value: right in thread order, wrong in any other.
FIRST_WINS = PROTOTYPE.replace(
    """        cuda.atomic.add(out, i % bins, x[i])""",
    """        if cuda.atomic.add(arrived, 0, 1) == 0:
            cuda.atomic.add(out, 0, x[i])""",
).replace("def index_add(x, out, n, bins):", "def index_add(x, out, n, bins, arrived):")
FIRST_WINS = FIRST_WINS.replace(
    "index = torch.arange(x.numel(), device=x.device) % BINS\n"
    "    return torch.zeros(BINS, dtype=x.dtype, device=x.device).index_add(0, index, x)",
    "out = torch.zeros(BINS, dtype=x.dtype, device=x.device)\n    out[0] = x[0]\n    return out",
).replace(
    "(x, out, n, BINS)",
    "(x, out, n, BINS, torch.zeros(1, dtype=torch.int32, device=x.device))",
)


def test_a_result_right_only_in_thread_order_fails_in_the_reversed_schedule(make_project, cli):
    assert FIRST_WINS.count("arrived") == 2 and "out[0] = x[0]" in FIRST_WINS
    root = make_project({"index_add": (FIRST_WINS, RIGHT)})
    result = cli(root, "check", "index_add", "--backend", "sim,torch", "--no-compile", "--json")
    assert result.exit_code == 1, result.output
    row = _rows(result)[("sim", "forward")]
    assert row["status"] == "fail"
    label = "output 0 in the reversed schedule (float atomics on 1 of 8 elements, up to 1 "
    assert row["detail"].startswith(f"{label}contributions): 1 of 1 summed elements differ")
    # the values that differ, as data: the summed elements of the other schedule's output
    tensor = "output 0 in the reversed schedule"
    assert row["mismatch"] == {"tensor": tensor, "mismatched": 1, "total": 1}
    assert row["detail"].endswith(
        "[seed 3; reproduce: portkit check index_add --case float32-n4096]"
    )


def test_portkit_sim_runs_the_reversed_schedule_and_compares_the_forward_one(make_project, cli):
    root = make_project({"index_add": (PROTOTYPE, RIGHT)})
    result = cli(root, "sim", "index_add", "--schedule", "reversed")
    assert result.exit_code == 0, result.output
    assert "output 0: order-dependent: the forward schedule differs by up to " in result.output
    wrong = make_project({"index_add": (FIRST_WINS, RIGHT)})
    result = cli(wrong, "sim", "index_add")  # thread order: right; the reversed run: wrong
    assert result.exit_code == 1, result.output
    assert "output 0 in the reversed schedule (float atomics on 1 of 8" in result.output
    assert "Traceback" not in result.output


def test_portkit_sim_schedule_is_for_portkits_simulator_only(make_project, cli):
    root = make_project({"index_add": (PROTOTYPE, RIGHT)})
    result = cli(root, "sim", "index_add", "--schedule", "reversed", "--backend", "numba-sim")
    assert result.exit_code == 2
    assert result.output.splitlines()[-1] == (
        "Error: --schedule applies to --backend sim (numba's runs one order)"
    )
    assert "Traceback" not in result.output
