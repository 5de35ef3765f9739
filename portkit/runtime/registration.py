"""An op's host launchers as a registered PyTorch op, with autograd and a fake kernel.

``RegisteredOp`` defines ``ns::name`` and ``ns::name_backward`` (its own op, so that
AOTAutograd can trace the backward) with ``torch.library.Library``; their fake kernels are
the launchers run on ``FakeKernels``, so authors write no shape function. The forward op
returns the outputs followed by the saved tensors that are neither inputs nor outputs
("extras"), which callers strip. ``OpCallable``, what ``portkit.load`` returns, calls the
registered op only when PyTorch is watching, and the launchers directly in plain eager:
custom_op's Python dispatch costs more than a launch (pytorch#177109). docs/fast-path.md
says how and why.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from . import torch_private
from .autograd_function import (
    Binding,
    OpLayout,
    as_tuple,
    check_gradients,
    eager_function,
    split_forward,
)
from .kernels_protocol import no_kernel_message
from .launch_contract import KernelsKind


class _NoLaunch:
    def __getitem__(self, config: Any) -> Callable[..., None]:
        return _ignore


def _ignore(*args: Any) -> None:
    return None


class FakeKernels:
    """``k`` for fake runs: launches do nothing, ``k.empty*`` allocate on ``device`` (under
    FakeTensorMode torch.empty makes a fake tensor, so shapes may be symbolic)."""

    def __init__(self, op: str, device: Any, kernel_names: Sequence[str], knobs: Any = None):
        self.op, self.device, self.implementation = op, device, "fake"
        self.kind, self.poison_outputs, self.plain_allocation = KernelsKind.FAKE, False, False
        self.knob_choice = knobs  # the real k's knobs (portkit.knobs): it computes as it would
        self._names = frozenset(kernel_names)

    def __getattr__(self, name: str) -> _NoLaunch:
        if name in self.__dict__.get("_names", ()):
            return _NoLaunch()
        names = sorted(self.__dict__.get("_names", ()))
        raise AttributeError(no_kernel_message(self.__dict__.get("op"), name, names))

    def empty(self, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
        return torch.empty(tuple(shape), dtype=dtype, device=self.device)

    def empty_like(self, tensor: torch.Tensor) -> torch.Tensor:
        return self.empty(tensor.shape, tensor.dtype)


def _unalias(results: Sequence[torch.Tensor], inputs: Sequence[Any]) -> tuple:
    """A custom op may not return its inputs, nor one tensor twice: clone those."""
    seen: set[int] = {id(i) for i in inputs}
    fixed = []
    for r in results:
        if id(r) in seen:
            r = r.clone()
        seen.add(id(r))
        fixed.append(r)
    return tuple(fixed)


class RegisteredOp:
    """An op's two operators, defined on first use (``define()``: a definition costs
    milliseconds, which ``portkit check`` need not pay), with an ``Autograd`` kernel of
    our own that runs plain-eager calls at once instead of ``custom_op``'s layers of
    Python (docs/fast-path.md, "Defined with torch.library.Library")."""

    def __init__(self, qualname: str, layout: OpLayout, kernel_names: Sequence[str]) -> None:
        self.qualname, self.layout = qualname, layout
        self.name = qualname.split("::", 1)[1]
        self.kernel_names = tuple(kernel_names)
        self.binding: Binding | None = None
        # The plain-eager forward that returns what the op's schema does (outputs, no
        # extras), or None: a replayer's run_eager (eager_replay.py, prepared.py).
        self.eager_forward: Callable[[tuple], Any] | None = None
        # Makes the C++ kernels put in front of the Python ones (eager_replay.py), or None.
        self.native_kernels: Callable[[], Any] | None = None
        self._forward_op: Any = None
        self._backward_op: Any = None
        self._function: Any = None

    @property
    def forward_op(self) -> Any:
        """``torch.ops.<namespace>.<name>.default``."""
        self.define()
        return self._forward_op

    @property
    def backward_op(self) -> Any:
        self.define()
        return self._backward_op

    @property
    def defined(self) -> bool:
        return self._forward_op is not None

    def define(self) -> None:
        if self._forward_op is not None:
            return
        layout, name = self.layout, self.name
        namespace = self.qualname.split("::", 1)[0]
        old = _LIBRARIES.pop(self.qualname, None)
        if old is not None:  # an edited op: its old schema goes
            old._destroy()
        lib = _LIBRARIES[self.qualname] = torch.library.Library(namespace, "FRAGMENT")
        ops = getattr(torch.ops, namespace)
        lib.define(name + layout.forward_schema())
        lib.impl(name, self._forward_impl, "CompositeExplicitAutograd")
        torch.library.register_fake(self.qualname, self._forward_fake, lib=lib)
        if layout.has_backward:
            lib.define(name + "_backward" + layout.backward_schema())
            lib.impl(name + "_backward", self._backward_impl, "CompositeExplicitAutograd")
            torch.library.register_fake(self.qualname + "_backward", self._backward_fake, lib=lib)
            self._backward_op = getattr(ops, name + "_backward").default
        self._function = _autograd_function(self)
        lib.impl(name, self._autograd_kernel, "Autograd", with_keyset=True)
        self._forward_op = getattr(ops, name).default
        self._register_native()

    def use_native_kernels(self, make: Callable[[], Any]) -> None:
        """Put ``make()``'s C++ kernels in front of the op's Python kernels (which they
        call for what they do not do themselves) until it is defined or bound anew."""
        self.native_kernels = make
        if self.defined:
            self._register_native()

    def _register_native(self) -> None:  # an old definition's or binding's kernels go first
        _NATIVE.pop(self.qualname, None)
        if self.native_kernels is not None:
            _NATIVE[self.qualname] = self.native_kernels()

    # -- the Autograd kernel: what torch.ops.<ns>.<op>(...) runs first --------------
    def _autograd_kernel(self, keyset: Any, *args: Any) -> Any:
        grad = self.layout.has_backward and _grad_enabled()
        plain, wanted = True, False
        for a in args:
            if isinstance(a, _Tensor):
                if grad and a.requires_grad:
                    wanted = True
                if type(a) not in _PLAIN_TENSORS:
                    plain = False
        watched = not plain or _watched()
        if not watched and self.eager_forward is not None:
            # The compiled replayer's call; a gradient wanted: its node, or it declines.
            result = self.eager_forward(args)
            if result is not None:
                if isinstance(result, _Tensor):
                    return _unalias((result,), args)[0]
                return _unalias(result, args)
        if wanted:
            return self._function.apply(keyset, *args)
        if watched:
            with _below_autograd():
                return self._forward_op.redispatch(keyset & _AFTER_AUTOGRAD, *args)
        return self._forward_impl(*args)

    # -- forward --------------------------------------------------------------
    def _run_forward(self, kernels: Any, args: Sequence[Any]) -> Any:
        b = self._bound()
        b.check(args)
        outputs, extras = split_forward(
            self.name, self.layout, args, b.forward(kernels, *args), b.error
        )
        results = _unalias(outputs + extras, args)
        return results if len(results) > 1 else results[0]

    def _forward_impl(self, *args: Any) -> Any:
        return self._run_forward(self._bound().kernels, args)

    def _forward_fake(self, *args: Any) -> Any:
        return self._run_forward(self._fake_kernels(args), args)

    # -- autograd -------------------------------------------------------------
    def _setup_context(self, ctx: Any, inputs: tuple, output: Any) -> None:
        out = as_tuple(output)
        first_extra = self.layout.outputs
        saved = []
        for kind, index in self.layout.saved:
            if kind == "input":
                saved.append(inputs[index])
            elif kind == "output":
                saved.append(out[index])
            else:
                saved.append(out[first_extra + index])
        ctx.save_for_backward(*saved)
        ctx.output_meta = [(o.shape, o.dtype, o.device) for o in out[: self.layout.outputs]]
        extras = out[self.layout.outputs :]
        if extras:  # the caller never sees them: no gradient flows in through them
            ctx.mark_non_differentiable(*extras)
        ctx.set_materialize_grads(False)  # _autograd makes the zeros an output needs

    def _autograd(self, ctx: Any, *grads: Any) -> tuple:
        grads = tuple(
            torch.zeros(shape, dtype=dtype, device=device) if g is None else g.contiguous()
            for g, (shape, dtype, device) in zip(grads[: self.layout.outputs], ctx.output_meta)
        )
        assert self.backward_op is not None
        result = iter(as_tuple(self.backward_op(*ctx.saved_tensors, *grads)))
        return tuple(next(result) if wanted else None for wanted in self.layout.grads)

    # -- backward -------------------------------------------------------------
    def _run_backward(self, kernels: Any, args: Sequence[Any]) -> Any:
        b = self._bound()
        assert b.backward is not None
        count = len(self.layout.saved)
        saved, grads = tuple(args[:count]), args[count:]
        result = as_tuple(b.backward(kernels, saved, *grads))
        check_gradients(self.name, self.layout, result, b.error)
        tensors = []
        for position, (value, wanted) in enumerate(zip(result, self.layout.grads)):
            if wanted and not isinstance(value, torch.Tensor):
                raise b.error(
                    f"op {self.name}: backward's gradient {position} is "
                    f"{type(value).__name__}; at registration it was a tensor"
                )
            if wanted:
                tensors.append(value)
        results = _unalias(tensors, args)
        return results if len(results) > 1 else results[0]

    def _backward_impl(self, *args: Any) -> Any:
        return self._run_backward(self._bound().kernels, args)

    def _backward_fake(self, *args: Any) -> Any:
        return self._run_backward(self._fake_kernels(args), args)

    # -- helpers ----------------------------------------------------------------
    def _bound(self) -> Binding:
        if self.binding is None:
            raise RuntimeError(f"{self.qualname} is registered but no implementation is bound")
        return self.binding

    def _fake_kernels(self, args: Sequence[Any]) -> FakeKernels:
        device = next(a.device for a in args if isinstance(a, torch.Tensor))
        choice = self.binding.kernels.knob_choice if self.binding is not None else None
        return FakeKernels(self.name, device, self.kernel_names, choice)


def _autograd_function(op: RegisteredOp) -> type[torch.autograd.Function]:
    """The registered op's differentiable call, as ``custom_op`` builds it: the forward
    redispatches below autograd to the op's kernels (or its fake one, when traced); the
    backward is ``<op>_backward``, so AOTAutograd can trace it."""

    class RegisteredFunction(torch.autograd.Function):
        @staticmethod
        def forward(keyset: Any, *args: Any) -> Any:
            with _below_autograd():
                return op._forward_op.redispatch(keyset & _AFTER_AUTOGRAD, *args)

        @staticmethod
        def setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
            op._setup_context(ctx, inputs[1:], output)

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> Any:
            return (None, *op._autograd(ctx, *grads))

    RegisteredFunction.__name__ = RegisteredFunction.__qualname__ = f"{op.name}_backward_node"
    return RegisteredFunction


# qualname -> the torch.library.Library holding its definition (destroyed to redefine it)
_LIBRARIES: dict[str, Any] = {}
# qualname -> the C++ kernels registered in front of its Python ones (dropped to remove them)
_NATIVE: dict[str, Any] = {}

# Mirrors torch's own process-wide registry (torch.ops.<namespace>.<name> is one name per
# process, whichever session loads it): qualname -> the op defined under it now.
_REGISTERED: dict[str, RegisteredOp] = {}


def register(
    qualname: str,
    layout: OpLayout,
    kernel_names: Sequence[str],
    binding: Binding,
    define_now: bool = True,
) -> RegisteredOp:
    """Define ``qualname`` (``define_now=False``: when first traced or watched). Loading
    it again rebinds it to the new launchers and kernels, so an edited op runs its new
    code; one whose inputs, outputs, saved tensors or kernels changed is defined anew
    (torch.library replaces a custom op defined again under the same name)."""
    op = _REGISTERED.get(qualname)
    if op is None or op.layout != layout or op.kernel_names != tuple(kernel_names):
        redefine = op is not None and op.defined
        op = _REGISTERED[qualname] = RegisteredOp(qualname, layout, kernel_names)
        define_now = define_now or redefine  # torch.ops.<name> must not keep the old schema
    elif op.binding is not binding:  # what replayed the old binding's calls is not this one's
        _NATIVE.pop(qualname, None)
        op.native_kernels = op.eager_forward = None
    op.binding = binding
    if define_now:
        op.define()
    return op


_dispatch_modes = torch_private.dispatch_mode_count
_function_modes = torch_private.function_mode_enabled
_functorch_level = torch_private.functorch_level
_is_compiling = torch.compiler.is_compiling
_grad_enabled = torch.is_grad_enabled
_below_autograd = torch_private.AutoDispatchBelowAutograd
_AFTER_AUTOGRAD = torch_private.AFTER_AUTOGRAD_KEYSET
_Tensor = torch.Tensor
_PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter)  # Parameter adds no dispatch behaviour
_SCALARS = (int, float, bool, str, type(None))


def _watched() -> bool:
    """torch.compile, a dispatch or function mode, or a functorch transform is active:
    the call must go through the registered op so that PyTorch sees it."""
    return bool(
        _is_compiling() or _dispatch_modes() or _function_modes() or _functorch_level() is not None
    )


class OpCallable:
    """``f(*inputs)``: the op, through the registered op when PyTorch traces or watches,
    straight through its launchers in plain eager (see the module docstring). The eager
    path runs on every call of a model, so its checks are ordered cheapest first and
    every unusual case drops to a slower path that explains."""

    # ``(self, inputs)`` -> the call's result where ``inputs`` hold another library's
    # arrays, else NotImplemented (portkit.load sets CuPy's: torch_op/cupy_arrays.py).
    # Asked only of inputs that are neither tensors nor plain scalars, so a call on
    # tensors pays nothing for it.
    other_arrays: Callable[[Any, tuple], Any] | None = None

    def __init__(self, registered: RegisteredOp, binding: Binding) -> None:
        self.registered, self.binding = registered, binding
        self.outputs = registered.layout.outputs
        self.__name__ = registered.name
        self._function = eager_function(registered.name, registered.layout, binding)
        self._differentiable = binding.backward is not None

    def __call__(self, *inputs: Any) -> Any:
        if _watched():
            return self._through_registered_op(inputs)
        needs_grad = False
        for i in inputs:
            if isinstance(i, _Tensor):
                if type(i) not in _PLAIN_TENSORS:
                    # a subclass (FakeTensor, DTensor, ...) dispatches through the op
                    return self._through_registered_op(inputs)
                if i.requires_grad:
                    needs_grad = True
            elif self.other_arrays is not None and type(i) not in _SCALARS:
                result = self.other_arrays(self, inputs)  # CuPy arrays, say
                if result is not NotImplemented:
                    return result
        b = self.binding
        if needs_grad and self._differentiable and _grad_enabled():
            return self._function.apply(*inputs)
        b.check(inputs)
        result = b.forward(b.kernels, *inputs)
        if type(result) is not tuple or len(result) != 2:
            raise b.error(f"op {self.__name__}: forward must return (outputs, saved_for_backward)")
        outputs = result[0]
        if self.outputs == 1 and isinstance(outputs, _Tensor):
            return outputs
        outputs = as_tuple(outputs)
        if len(outputs) != self.outputs:
            raise b.error(
                f"op {self.__name__}: forward returned {len(outputs)} outputs; "
                f"at registration it returned {self.outputs}"
            )
        return outputs if len(outputs) > 1 else outputs[0]

    @property
    def op(self) -> Any:
        """The registered op, ``torch.ops.<namespace>.<op>_<implementation>.default``."""
        return self.registered.forward_op

    def _through_registered_op(self, inputs: tuple) -> Any:
        if self.other_arrays is not None:
            converted = self.other_arrays(self, inputs)
            if converted is not NotImplemented:
                return converted
        result = as_tuple(self.op(*inputs))[: self.outputs]
        return result if len(result) > 1 else result[0]
