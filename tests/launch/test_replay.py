"""Replay on the CPU (runtime/replaying.py): a launcher's recorded calls replay without
running it, give
the same results in fresh buffers, and every call that could not be repeated faithfully
(views, other PyTorch operations, the checked path, repeated tensors, another ``k``)
runs the launcher as before. The "kernel" scales floats through raw CPU pointers, so a
replay that passed the wrong pointer or scalar would give wrong numbers."""

from __future__ import annotations

import ctypes
import shutil
import struct

import numpy as np
import pytest
import torch

from portkit.launch.kernel_set import KernelSet, LaunchTarget
from portkit.runtime import driver_launch
from portkit.runtime.prepared import PreparedReplayer, leaf_key
from portkit.runtime.recorder import MAX_FAILURES
from portkit.runtime.replaying import ReplayingLauncher, replayers
from portkit.runtime.steps import MAX_SIGNATURES, ReplayLaunch
from portkit.torch_op.load import replays_launches


@pytest.fixture(autouse=True)
def cpu_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    """The prepared replayer launches on torch's current CUDA stream: none on the CPU."""
    monkeypatch.setattr(driver_launch, "current_stream", lambda device: 0)


def floats(pointer: int, n: int) -> np.ndarray:
    return np.ctypeslib.as_array(ctypes.cast(pointer, ctypes.POINTER(ctypes.c_float)), (n,))


DRIVERS: dict[int, ScaleDriver] = {}


class ScaleDriver:
    """``scale(x, out, n, factor)``: out = x * factor, on raw CPU pointers. The compiled
    replayer reaches it through ``c_launch`` with ``handle`` as the function."""

    def __init__(self) -> None:
        self.launches: list[tuple] = []
        self.handle = len(DRIVERS) + 1
        DRIVERS[self.handle] = self

    def launch(self, grid, block, shared, stream, values, warps=0) -> None:
        x, out, n, factor = values
        floats(out, n)[:] = floats(x, n) * np.float32(factor)
        self.launches.append((grid, block, tuple(values)))

    def packed(self, values) -> bytes:
        return struct.pack("=QQqd", *values)


@ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.c_void_p,
    *[ctypes.c_uint] * 7,
    ctypes.c_void_p,
    ctypes.POINTER(ctypes.c_void_p),
    ctypes.c_void_p,
)
def c_launch(function, gx, gy, gz, bx, by, bz, shared, stream, params, extra) -> int:
    """cuLaunchKernel's signature, for the compiled replayer built against CPU torch."""
    slot = [ctypes.cast(params[i], ctypes.POINTER(ctypes.c_uint64))[0] for i in range(4)]
    n = ctypes.cast(params[2], ctypes.POINTER(ctypes.c_int64))[0]
    factor = ctypes.cast(params[3], ctypes.POINTER(ctypes.c_double))[0]
    DRIVERS[function].launch((gx, gy, gz), (bx, by, bz), shared, 0, [*slot[:2], n, factor])
    return 0


def compiled_replayer(capacity: int = MAX_SIGNATURES):
    if not (shutil.which("ninja") and shutil.which("c++")):
        pytest.skip("no ninja or C++ compiler here to build the compiled replayer")
    from portkit.runtime.native_replayer import NativeReplayer, _built, compiled_module

    module = compiled_module()
    assert module is not None, _built.get("reason")
    return NativeReplayer(module, ctypes.cast(c_launch, ctypes.c_void_p).value, 0, capacity)


@pytest.fixture(params=["python", "compiled"])
def new_replayer(request: pytest.FixtureRequest):
    """Each replayer in turn: the compiled one is built against this CPU torch."""
    if request.param == "python":
        return PreparedReplayer
    compiled_replayer()  # build (or skip) before the test starts
    return compiled_replayer


class ScaleTarget(LaunchTarget):
    """With ``checked_first``, like the twin: its first launch takes the checked path
    (where the twin builds its plan)."""

    has_plain_launch = has_replay_step = True

    def __init__(self, checked_first: bool = False) -> None:
        self.driver = ScaleDriver()
        self.checked = 0
        self.planned = not checked_first

    def launch(self, config, args) -> None:
        self.checked += 1
        self.planned = True
        values = [a.data_ptr() if isinstance(a, torch.Tensor) else a for a in args]
        self.driver.launch(config.grid, config.block, config.shared_bytes, 0, values)

    def plain_launch(self, config):
        def launch(args) -> bool:
            if not self.planned or not all(
                isinstance(a, torch.Tensor) or type(a) in (int, float) for a in args
            ):
                return False
            self.launch(config, args)
            self.checked -= 1
            return True

        return launch

    def replay_step(self, config, args) -> ReplayLaunch:
        tensors = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        values = tuple(None if i in tensors else a for i, a in enumerate(args))
        return ReplayLaunch(
            self.driver,
            config.grid,
            config.block,
            0,
            0,
            values,
            tuple((i, i) for i in tensors),
        )


def kernels(checked_first: bool = False) -> KernelSet:
    return KernelSet("scale", "fake", "cpu", {"scale": ScaleTarget(checked_first)})


class Counted:
    """A forward launcher ``(outputs, saved)`` that counts how often its Python ran."""

    def __init__(self, body=None) -> None:
        self.calls = 0
        self.body = body

    def __call__(self, k, x, factor=2.0):
        self.calls += 1
        if self.body is not None:
            x = self.body(x)
        out = k.empty_like(x)
        k.scale[1, 32](x, out, x.numel(), factor)
        return out, (x, out)


def test_a_recorded_signature_replays_into_fresh_buffers_without_the_launcher(new_replayer) -> None:
    k = kernels(checked_first=True)
    launcher = Counted()
    f = ReplayingLauncher(launcher, k, new_replayer(), flat=True)
    x = torch.arange(5, dtype=torch.float32)
    f(k, x, 3.0)  # the target's first launch takes the checked path: not recorded
    assert launcher.calls == 1 and not f.unreplayable and not len(f.replayer)
    first, (saved_x, saved_out) = f(k, x, 3.0)
    second, (again_x, again_out) = f(k, x + 1, 3.0)
    third, _ = f(k, x + 2, 3.0)
    assert launcher.calls == 2 and f.recorded == 2
    assert torch.equal(first, x * 3) and torch.equal(second, (x + 1) * 3)
    assert torch.equal(third, (x + 2) * 3)
    assert second.data_ptr() != first.data_ptr() and third.data_ptr() != second.data_ptr()
    assert saved_x is x and saved_out is first and again_out is second
    assert len(k.scale.target.driver.launches) == 4


def test_a_new_shape_or_scalar_records_again(new_replayer) -> None:
    k = kernels()
    launcher = Counted()
    f = ReplayingLauncher(launcher, k, new_replayer(), flat=True)
    x = torch.ones(4)
    f(k, x, 2.0)
    f(k, torch.ones(6), 2.0)
    out, _ = f(k, x, 5.0)
    assert launcher.calls == 3
    assert torch.equal(out, x * 5)
    out, _ = f(k, torch.ones(4), 5.0)
    assert launcher.calls == 3 and torch.equal(out, x * 5)


@pytest.mark.parametrize(
    "body, reason",
    [
        (lambda x: x.view(-1), "aten.view"),
        (lambda x: x + 0, "aten.add"),
    ],
)
def test_a_launcher_doing_other_torch_work_is_never_replayed(body, reason, new_replayer) -> None:
    k = kernels()
    launcher = Counted(body)
    f = ReplayingLauncher(launcher, k, new_replayer(), flat=True)
    x = torch.ones(4)
    for _ in range(3):
        out, _ = f(k, x, 2.0)
        assert torch.equal(out, x * 2)
    assert launcher.calls == 3
    (why,) = f.unreplayable.values()
    assert reason in why


def test_a_launch_on_the_checked_path_is_not_recorded(new_replayer) -> None:
    k = kernels()
    launcher = Counted()
    f = ReplayingLauncher(launcher, k, new_replayer(), flat=True)
    x = torch.ones(4)
    f(k, x, np.float64(2.0))  # a NumPy scalar: leaves cannot be keyed at all
    assert not f.unreplayable and launcher.calls == 1

    def numpy_factor(k, x):
        launcher.calls += 1
        out = k.empty_like(x)
        k.scale[1, 32](x, out, x.numel(), np.float32(2.0))
        return out, ()

    g = ReplayingLauncher(numpy_factor, k, new_replayer(), flat=True)
    g(k, x)
    out, _ = g(k, x)
    assert launcher.calls == 3 and torch.equal(out, x * 2)
    assert "checked path" in next(iter(g.unreplayable.values()))


def test_the_same_tensor_twice_is_not_recorded(new_replayer) -> None:
    k = kernels()

    def add_like(k, a, b):
        out = k.empty_like(b)
        k.scale[1, 32](b, out, b.numel(), 1.0)
        return out, ()

    f = ReplayingLauncher(add_like, k, new_replayer(), flat=True)
    x, y = torch.ones(3), torch.full((3,), 4.0)
    f(k, x, x)
    out, _ = f(k, x, y)  # same key as (x, x): must use b, not a
    assert torch.equal(out, y)
    out, _ = f(k, y, x)
    assert torch.equal(out, x)


def test_only_the_production_kernels_replay(new_replayer) -> None:
    k = kernels()
    launcher = Counted()
    f = ReplayingLauncher(launcher, k, new_replayer(), flat=True)
    x = torch.ones(4)
    f(k, x, 2.0)
    other = kernels()
    f(other, x, 2.0)  # FakeKernels, a checker's k: not the kernels it records on
    assert launcher.calls == 2
    f(k, x, 2.0)
    assert launcher.calls == 2  # replayed
    # A launcher made over a checker's k (poisoned outputs) never replays, not even on it.
    poisoned = KernelSet("scale", "fake", "cpu", {"scale": ScaleTarget()}, poison_outputs=True)
    checked = Counted()
    g = ReplayingLauncher(checked, poisoned, new_replayer(), flat=True)
    for _ in range(3):
        out, _ = g(poisoned, x, 2.0)
        assert torch.equal(out, x * 2)
    assert checked.calls == 3


def test_a_backward_with_a_saved_tuple_replays(new_replayer) -> None:
    k = kernels()
    calls = []

    def backward(k, saved, grad):
        calls.append(1)
        (x,) = saved
        out = k.empty_like(grad)
        k.scale[1, 32](grad, out, grad.numel(), 0.5)
        return (out,)

    f = ReplayingLauncher(backward, k, new_replayer(), flat=False)
    x, g = torch.ones(4), torch.full((4,), 2.0)
    assert torch.equal(f(k, (x,), g)[0], g * 0.5)
    (second,) = f(k, (x,), g * 4)
    assert len(calls) == 1 and torch.equal(second, g * 2)
    f(k, [x], g)  # a list, not a tuple: another structure, recorded anew
    assert len(calls) == 2


def test_replay_is_given_up_for_a_launcher_that_never_records(new_replayer) -> None:
    k = kernels()
    launcher = Counted(lambda x: x.view(-1))
    f = ReplayingLauncher(launcher, k, new_replayer(), flat=True)
    for n in range(1, MAX_FAILURES + 1):
        f(k, torch.ones(n), 2.0)
    assert f.replayer is None
    f(k, torch.ones(1), 2.0)
    assert launcher.calls == MAX_FAILURES + 1


def test_the_switch_turns_replay_off() -> None:
    assert replayers("portkit", "off") is None
    pair = replayers("portkit", "python")
    assert pair is not None and all(type(r) is PreparedReplayer for r in pair)


def test_targets_that_cannot_repeat_launches_are_not_wrapped() -> None:
    class Plain(LaunchTarget):
        def launch(self, config, args) -> None: ...

    assert not replays_launches(KernelSet("op", "impl", "cpu", {"scale": Plain()}))
    assert replays_launches(kernels())


def test_keys_tell_scalars_apart_by_type_and_bits() -> None:
    keys = {leaf_key((v,)) for v in (0.0, -0.0, 1, True, 1.0, float("nan"), None, "1")}
    assert len(keys) == 8
    assert leaf_key((float("nan"),)) == leaf_key((float("nan"),))
    assert leaf_key((np.float32(1.0),)) is None
    x = torch.ones(4, 2)
    assert leaf_key((x,)) != leaf_key((x.t(),)) != leaf_key((x.double(),))


def test_the_prepared_replayer_forgets_everything_when_full() -> None:
    replayer = PreparedReplayer(capacity=2)
    k = kernels()
    f = ReplayingLauncher(Counted(), k, replayer, flat=True)
    for n in (1, 2, 3):
        f(k, torch.ones(n), 2.0)
    assert len(replayer) == 1


def test_a_moved_input_check_runs_on_every_call_not_replayed(new_replayer) -> None:
    k = kernels()
    checked = []

    def check(inputs) -> None:
        checked.append(len(inputs))
        if inputs[0].dtype != torch.float32:
            raise TypeError("scale takes float32")

    f = ReplayingLauncher(Counted(), k, new_replayer(), flat=True, check=check)
    x = torch.ones(4)
    f(k, x, 2.0)
    f(k, x, 2.0)  # replayed: this signature passed the check when it was recorded
    assert checked == [2]
    with pytest.raises(TypeError, match="float32"):
        f(k, x.double(), 2.0)
    f(kernels(), x, 2.0)  # another k: checked, then its launcher
    assert checked == [2, 2, 2]


def test_the_eager_call_replays_only_when_nothing_watches(new_replayer) -> None:
    """``run_eager``: portkit.load's whole plain-eager call (in C++: ReplayedOpCallable;
    in Python: prepared.ReplayedOp)."""
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    k = kernels()
    f = ReplayingLauncher(Counted(), k, new_replayer(), flat=True, outputs=1)
    x = torch.arange(4, dtype=torch.float32)
    assert f.run_eager((x, 2.0)) is None  # not recorded yet
    f(k, x, 2.0)
    out = f.run_eager((x + 1, 2.0))
    assert isinstance(out, torch.Tensor) and torch.equal(out, (x + 1) * 2)

    class Watching(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    class Functions(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with Watching():
        assert f.run_eager((x, 2.0)) is None
    with Functions():
        assert f.run_eager((x, 2.0)) is None
    grad = x.clone().requires_grad_()
    assert f.run_eager((grad, 2.0)) is None  # autograd must record the op
    with torch.no_grad():
        assert torch.equal(f.run_eager((grad, 2.0)), x * 2)

    class Sub(torch.Tensor):
        pass

    assert f.run_eager((x.as_subclass(Sub), 2.0)) is None
    inside_vmap = []
    torch.func.vmap(lambda row: inside_vmap.append(f.run_eager((row, 2.0))) or row)(
        torch.ones(2, 4)
    )
    assert inside_vmap == [None]
    assert torch.equal(f.run_eager((torch.nn.Parameter(x, requires_grad=False), 2.0)), x * 2)


def test_a_backward_offers_no_eager_call(new_replayer) -> None:
    assert ReplayingLauncher(Counted(), kernels(), new_replayer(), flat=False).run_eager is None


@pytest.mark.parametrize(
    "result, outputs, expected",
    [
        ((-1, (0, -1)), 1, -1),  # one tensor
        (((-1, -2), ()), 2, (-1, -2)),  # a tuple of two
        (([-1], ()), 1, -1),  # a list of one: its tensor
        ((-1, ()), 2, None),  # one tensor where two are declared: the Python path raises
        (((-1, None), ()), 2, None),
        ((-1,), 1, None),
    ],
)
def test_the_eager_result_is_what_opcallable_returns(result, outputs, expected) -> None:
    from portkit.runtime.steps import eager_template

    assert eager_template(result, outputs) == expected


def test_a_replayer_that_cannot_be_compiled_says_why_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from portkit.runtime import native_replayer as native

    def refused(who: str) -> None:
        raise RuntimeError("the build failed\nno C++ compiler here")

    monkeypatch.setattr(native, "launch_entry_points", lambda: (0, 0))  # as on a GPU
    monkeypatch.setattr(native, "_build", refused)
    monkeypatch.setattr(native, "_built", {})
    monkeypatch.setattr(native, "_said", set())
    pair = replayers("portkit", "auto")
    assert pair is not None and all(type(r) is PreparedReplayer for r in pair)
    err = capsys.readouterr().err
    assert err == "portkit: launches replay in Python: RuntimeError: no C++ compiler here\n"


def test_both_replayers_key_only_plain_tensors_and_tell_devices_apart() -> None:
    class Sub(torch.Tensor):
        pass

    x = torch.ones(4)
    for replayer in (PreparedReplayer(), compiled_replayer()):
        assert replayer.key((x,)) is not None
        assert replayer.key((torch.nn.Parameter(x),)) == replayer.key((x,))
        assert replayer.key((x.as_subclass(Sub),)) is None  # its outputs may be its own type
        assert replayer.key((torch.ones(4, device="meta"),)) != replayer.key((x,))
