"""The checker draws a case's inputs once and hands every implementation its own copy."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from portkit.checking.harness import CaseRunner
from portkit.project.cases import Case, draw_device, make_grad_outputs, make_inputs


def test_each_implementation_gets_an_equal_fresh_copy() -> None:
    case = Case("float32-n129", ((129,), (129,)), "float32", seed=3)
    runner = CaseRunner(SimpleNamespace(name="add"), case)
    first = runner.inputs("cpu")
    for got, want in zip(first, make_inputs(case, "cpu")):
        assert torch.equal(got, want)
    first[0].fill_(0)  # an implementation that writes its input
    second = runner.inputs("cpu")
    assert torch.equal(second[0], make_inputs(case, "cpu")[0])
    assert second[0].data_ptr() != first[0].data_ptr()


def test_inputs_are_drawn_on_the_cpu_unless_a_gpu_only_case_meets_a_gpu(monkeypatch) -> None:
    plain = Case("float32-n129", ((129,),), "float32")
    gpu_only = Case("float32-n129", ((129,),), "float32", gpu_only=True)
    own_maker = Case(
        "made", ((3,),), "float32", gpu_only=True, inputs=lambda g, dtype, device: [torch.ones(3)]
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert [draw_device(c) for c in (plain, gpu_only, own_maker)] == ["cpu", "cpu", "cpu"]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert [draw_device(c) for c in (plain, gpu_only, own_maker)] == ["cpu", "cuda", "cpu"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="PyTorch sees no GPU")
def test_a_gpu_only_case_is_drawn_on_the_gpu_the_same_for_every_device() -> None:
    case = Case(
        "bfloat16-4x1000", ((4, 1000), (4, 1000)), "bfloat16", seed=5, gpu_only=True,
        special=(float("inf"), float("nan")),
    )
    on_gpu, on_cpu = make_inputs(case, "cuda"), make_inputs(case, "cpu")
    assert [t.device.type for t in on_gpu] == ["cuda", "cuda"]
    for gpu, cpu in zip(on_gpu, on_cpu):
        assert torch.equal(gpu.cpu().view(torch.int16), cpu.view(torch.int16))
    assert torch.isinf(on_cpu[0].view(-1)[0]) and torch.isnan(on_cpu[1].view(-1)[0])
    generator = torch.Generator("cuda").manual_seed(5)
    drawn = torch.randn((4, 1000), dtype=torch.bfloat16, generator=generator, device="cuda")
    assert torch.equal(on_gpu[0].view(-1)[6:], drawn.view(-1)[6:])  # torch's CUDA draw
    again = make_inputs(case, "cuda")
    assert all(torch.equal(a.view(torch.int16), b.view(torch.int16)) for a, b in zip(on_gpu, again))
    grads = make_grad_outputs(case, on_gpu)
    assert torch.equal(grads[0], make_grad_outputs(case, on_cpu)[0].cuda())
    runner = CaseRunner(SimpleNamespace(name="add"), case)
    assert torch.equal(runner.inputs("cpu")[1].view(torch.int16), on_cpu[1].view(torch.int16))
    assert runner._drawn_inputs is not None and runner._drawn_inputs[0].is_cuda
