"""The driver launch path's argument packing, checked on a CPU: cuLaunchKernel is replaced
by a function that reads the parameter block the way the driver would (an array of
pointers, one per parameter, each to that parameter's bytes)."""

from __future__ import annotations

import ctypes
import struct
import threading

import pytest

from portkit.runtime import driver_launch


@pytest.fixture
def launches(monkeypatch):
    from cuda.bindings import driver

    seen = []

    def fake_launch(function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        pointers = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))
        seen.append(
            {
                "function": int(function),
                "grid": (gx, gy, gz),
                "block": (bx, by, bz),
                "shared": shared,
                "stream": stream,
                "slots": [ctypes.string_at(pointers[i], 8) for i in range(4)],
            }
        )
        return (driver.CUresult.CUDA_SUCCESS,)

    monkeypatch.setattr(driver, "cuLaunchKernel", fake_launch)
    # torch's own launcher (GPU builds of torch) would launch for real: tests that want it
    # put a recorder in its place.
    monkeypatch.setattr(driver_launch, "static_launcher", lambda: None)
    return seen


def test_parameters_reach_the_driver_as_the_kernel_reads_them(launches) -> None:
    kernel = driver_launch.DriverKernel(0x1234, ["pointer", "float", "int", "long long"])
    kernel.launch((3, 1, 1), (256, 1, 1), 64, 7, [0xDEADBEEF00, 1.5, -2, 2**40])
    (launch,) = launches
    assert launch["function"] == 0x1234
    assert (launch["grid"], launch["block"], launch["shared"], launch["stream"]) == (
        (3, 1, 1),
        (256, 1, 1),
        64,
        7,
    )
    slots = launch["slots"]
    assert struct.unpack("=Q", slots[0])[0] == 0xDEADBEEF00
    assert struct.unpack("=f", slots[1][:4])[0] == 1.5
    assert struct.unpack("=i", slots[2][:4])[0] == -2
    assert struct.unpack("=q", slots[3])[0] == 2**40


def test_values_that_do_not_fit_raise_before_the_launch(launches) -> None:
    kernel = driver_launch.DriverKernel(1, ["int", "int", "int", "int"])
    with pytest.raises(struct.error):
        kernel.launch((1, 1, 1), (1, 1, 1), 0, 0, [2**40, 0, 0, 0])
    with pytest.raises(struct.error):
        kernel.launch((1, 1, 1), (1, 1, 1), 0, 0, [1.5, 0, 0, 0])
    assert launches == []


def test_each_thread_packs_into_its_own_block(launches) -> None:
    kernel = driver_launch.DriverKernel(1, ["int", "int", "int", "int"])
    addresses = []

    def run() -> None:
        addresses.append(kernel._buffers.address)
        kernel.launch((1, 1, 1), (1, 1, 1), 0, 0, [1, 2, 3, 4])

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    run()
    assert len(set(addresses)) == 3 and len(launches) == 3


TWIN = """
template <typename T>
__global__ void scale(const T* __restrict__ x, T* __restrict__ out, T factor, long long n) {}
"""


def _twin_target(tmp_path, monkeypatch, source: str, name: str, handles: dict):
    """The twin backend's launch target for a parsed kernel, on CPU tensors (device -1)."""
    from portkit.backends.twin.backend import TwinKernelTarget
    from portkit.backends.twin.source import parse_twin

    path = tmp_path / f"{name}.cu"
    path.write_text(source)
    monkeypatch.setattr(driver_launch, "current_stream", lambda device: 99)
    return TwinKernelTarget(parse_twin(path)[name], handles, device=-1)


@pytest.fixture
def scale_target(tmp_path, monkeypatch):
    return _twin_target(tmp_path, monkeypatch, TWIN, "scale", {("float",): 11, ("double",): 22})


def test_twin_target_picks_the_instantiation_and_packs_arguments(scale_target, launches):
    import torch

    from portkit.launch.kernel_set import LaunchConfig

    config = LaunchConfig((2, 1, 1), (128, 1, 1), 0)
    for dtype, handle, code in ((torch.float32, 11, "=f"), (torch.float64, 22, "=d")):
        x, out = torch.ones(4, dtype=dtype), torch.empty(4, dtype=dtype)
        for _ in range(2):  # the second launch takes the cached plan
            scale_target.launch(config, [x, out, 0.5, 4])
        launch = launches[-1]
        assert launch["function"] == handle and launch["stream"] == 99
        slots = launch["slots"]
        assert struct.unpack("=Q", slots[0])[0] == x.data_ptr()
        assert struct.unpack("=Q", slots[1])[0] == out.data_ptr()
        assert struct.unpack(code, slots[2][: struct.calcsize(code)])[0] == 0.5
        assert struct.unpack("=q", slots[3])[0] == 4


@pytest.mark.parametrize(
    "make_args, words",
    [
        (lambda t: [t, t, 0.5, 2.5], "parameter n is a long long; got float 2.5"),
        (lambda t: [t, 7, 0.5, 4], "parameter out is a pointer; pass a tensor, not int"),
        (lambda t: [t, t.double(), 0.5, 4], "out is float64 but earlier T* arguments"),
        (lambda t: [t, t, 0.5], "takes 4 arguments (x, out, factor, n), got 3"),
        (lambda t: [t, t, t, 4], "parameter factor is a float scalar; got a tensor"),
        (lambda t: [t, t, t[:1], 4], "parameter factor is a float scalar; got a tensor"),
    ],
)
def test_twin_target_errors_are_the_clear_ones(scale_target, launches, make_args, words):
    import torch

    from portkit.errors import InputError
    from portkit.launch.kernel_set import LaunchConfig

    config = LaunchConfig((1, 1, 1), (32, 1, 1), 0)
    t = torch.ones(4)
    scale_target.launch(config, [t, t, 0.5, 4])  # a plan exists: errors must not hide behind it
    with pytest.raises(InputError) as info:
        scale_target.launch(config, make_args(t))
    assert words in str(info.value)
    assert len(launches) == 1


def test_twin_fast_path_launches_only_what_its_plan_expects(scale_target, launches) -> None:
    """``plain_launch``: True and one launch for plain arguments once a plan exists;
    False and no launch for anything else, so the checked path can explain it."""
    import numpy as np
    import torch

    from portkit.launch.kernel_set import LaunchConfig

    config = LaunchConfig((1, 1, 1), (32, 1, 1), 0)
    launch = scale_target.plain_launch(config)
    t = torch.ones(4)
    assert launch([t, t, 0.5, 4]) is False  # no plan yet
    scale_target.launch(config, [t, t, 0.5, 4])
    assert launch([t, t, 0.5, 4]) is True
    assert len(launches) == 2
    assert struct.unpack("=Q", launches[-1]["slots"][1])[0] == t.data_ptr()
    doubted = [
        [t, t.double(), 0.5, 4],  # a second dtype
        [t, torch.ones(4, 2)[:, 0], 0.5, 4],  # not contiguous
        [t, t, t, 4],  # a tensor for a scalar
        [t, t, 0.5, np.float32(4)],  # a NumPy float for an integer parameter
        [t, t, 0.5, 2**80],  # does not fit
        [t, t, 0.5],  # too few
        [t, 7, 0.5, 4],  # an int for a pointer
    ]
    for args in doubted:
        assert launch(args) is False, args
    assert len(launches) == 2
    # A NumPy scalar is the number it holds, whatever its width, as in an exported package.
    for number, value in ((np.int64(4), 4), (np.int32(-5), -5), (np.uint8(7), 7)):
        assert launch([t, t, 0.5, number]) is True
        assert struct.unpack("=q", launches[-1]["slots"][3])[0] == value
    assert launch([t, t, np.float32(0.25), 4]) is True
    assert struct.unpack("=f", launches[-1]["slots"][2][:4])[0] == 0.25


def test_torchs_launcher_takes_one_dimensional_whole_warp_blocks(monkeypatch, launches) -> None:
    """Where torch has its C++ launcher, plain values go to it with the right codes and
    32 x warps threads; other blocks use cuLaunchKernel."""
    static = []
    monkeypatch.setattr(driver_launch, "static_launcher", lambda: lambda *a: static.append(a))
    kernel = driver_launch.DriverKernel(0x99, ["pointer", "float", "int", "long long"])
    values = [0xBEEF, 0.5, -3, 2**40]

    def launch(grid, block, shared=0):
        warps = driver_launch.static_warps(grid, block)
        kernel.launch(grid, block, shared, 7, values, warps)

    launch((5, 1, 1), (256, 1, 1), 128)
    assert static == [(0x99, 5, 1, 1, 8, 128, "Ofil", tuple(values), 7)] and launches == []
    launch((5, 1, 1), (16, 16, 1))  # 2-D block
    launch((5, 1, 1), (48, 1, 1))  # not whole warps
    launch((2**31 - 1, 2, 1), (256, 1, 1))  # grid past a C int
    assert len(static) == 1 and len(launches) == 3
    with pytest.raises(struct.error):  # checked before either launcher sees it
        kernel.launch((1, 1, 1), (32, 1, 1), 0, 7, [1, 0.5, 2**40, 1], 1)
    assert len(static) == 1 and len(launches) == 3


def test_a_slot_torchs_launcher_cannot_take_keeps_the_driver(monkeypatch, launches) -> None:
    static = []
    monkeypatch.setattr(driver_launch, "static_launcher", lambda: lambda *a: static.append(a))
    # four slots: the fake driver reads four
    kernel = driver_launch.DriverKernel(1, ["pointer", "raw", "int", "int"])
    kernel.launch((1, 1, 1), (32, 1, 1), 0, 0, [1, b"\x00" * 8, 2, 3], 1)
    assert static == [] and len(launches) == 1


MASKED = """
template <typename T>
__global__ void masked(const T* __restrict__ x, T* __restrict__ out, bool keep, long long n) {}
"""


@pytest.fixture
def masked_target(tmp_path, monkeypatch):
    return _twin_target(tmp_path, monkeypatch, MASKED, "masked", {("float",): 11})


def test_a_python_bool_takes_the_production_path_as_a_one_byte_c_bool(masked_target, launches):
    """A ``bool`` parameter: a Python bool is packed into its slot (1 byte, the rest
    padding) by ``plain_launch`` and its launch can be replayed; an int or float there
    still goes to the checked path (struct's "?" would turn 5 or 0.5 into true)."""
    import torch

    from portkit.launch.kernel_set import LaunchConfig

    config = LaunchConfig((1, 1, 1), (32, 1, 1), 0)
    launch = masked_target.plain_launch(config)
    t = torch.ones(4)
    masked_target.launch(config, [t, t, True, 4])  # the first launch builds the plan
    for value, byte in ((True, b"\x01"), (False, b"\x00")):
        assert launch([t, t, value, 4]) is True
        assert launches[-1]["slots"][2][:1] == byte
    assert len(launches) == 3
    for doubted in (1, 0.5, None):
        assert launch([t, t, doubted, 4]) is False
    assert len(launches) == 3
    step = masked_target.replay_step(config, [t, t, True, 4])
    assert step is not None and step.values[2] is True
    assert step.packed()[16:17] == b"\x01"


GROUPED = """
template <typename T>
__global__ void grouped(const T* __restrict__ x, T* __restrict__ out, int group, long long n) {}
"""


def test_numpy_int32_for_a_c_int_takes_the_production_path_and_replays(
    tmp_path, monkeypatch, launches
):
    """lint advises numpy.int32 for a C ``int`` when 32 bits are meant, so such a call must
    not fall to the checked path on every launch (replay refuses those): the production
    path takes a NumPy scalar as the Python number it holds, where that fits the slot."""
    import numpy as np
    import torch

    from portkit.launch.kernel_set import LaunchConfig

    target = _twin_target(tmp_path, monkeypatch, GROUPED, "grouped", {("float",): 11})
    config = LaunchConfig((1, 1, 1), (32, 1, 1), 0)
    launch = target.plain_launch(config)
    t = torch.ones(4)
    target.launch(config, [t, t, np.int32(8), 4])  # the first launch builds the plan
    assert launch([t, t, np.int32(8), 4]) is True
    assert launches[-1]["slots"][2][:4] == (8).to_bytes(4, "little")
    # A NumPy scalar is its number (the runtime's one rule, an exported package's too):
    # a wider integer that fits launches; one that does not fit, or a float, does not.
    assert launch([t, t, np.int64(8), 4]) is True
    assert launch([t, t, np.int64(2**40), 4]) is False
    assert launch([t, t, np.float64(8.0), 4]) is False
    step = target.replay_step(config, [t, t, np.int32(8), 4])
    assert step is not None and type(step.values[2]) is int and step.values[2] == 8
