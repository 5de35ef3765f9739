"""Structured inputs (portkit/project/input_kinds.py): a case names a kind per input, or
supplies a function making them, and every draw is valid and reproducible by seed."""

from __future__ import annotations

import pytest
import torch

from portkit.project.cases import (
    Case,
    bounded,
    custom,
    duplicates,
    indices,
    make_inputs,
    offsets,
    permutation,
    positive,
)

SEEDS = range(20)


@pytest.mark.parametrize("seed", SEEDS)
def test_offsets_are_sorted_from_zero_to_the_total(seed):
    case = custom("csr", [(37, 3), (9,)], input_dtypes=("float32", "int64"), seed=seed,
                  kinds=(None, offsets((0, 0))))
    _, offs = make_inputs(case, "cpu")
    assert offs.dtype == torch.int64 and offs.shape == (9,)
    assert offs[0] == 0 and offs[-1] == 37
    assert bool((offs[1:] >= offs[:-1]).all())


def test_offsets_produce_empty_segments_somewhere():
    empty = 0
    for seed in SEEDS:
        case = custom("csr", [(10,), (9,)], input_dtypes=("float32", "int32"), seed=seed,
                      kinds=(None, offsets(10)))
        offs = make_inputs(case, "cpu")[1]
        assert offs.dtype == torch.int32
        empty += int((offs[1:] == offs[:-1]).sum())
    assert empty > 0


@pytest.mark.parametrize("seed", SEEDS)
def test_a_permutation_holds_every_index_once(seed):
    case = custom("perm", [(4, 25)], "int64", seed=seed, kinds=(permutation(),))
    (p,) = make_inputs(case, "cpu")
    assert p.shape == (4, 25)
    assert torch.equal(p.reshape(-1).sort().values, torch.arange(100))


@pytest.mark.parametrize("seed", SEEDS)
def test_indices_are_valid_and_duplicates_repeat(seed):
    shapes = [(50, 4), (400,), (400,)]
    case = custom("gather", shapes, input_dtypes=("float32", "int64", "int64"), seed=seed,
                  kinds=(None, indices((0, 0)), duplicates((0, 0))))
    _, plain, repeated = make_inputs(case, "cpu")
    for idx in (plain, repeated):
        assert idx.dtype == torch.int64 and bool(((idx >= 0) & (idx < 50)).all())
    assert repeated.unique().numel() <= 100  # a quarter as many distinct values
    assert repeated.unique().numel() < repeated.numel()


@pytest.mark.parametrize("seed", SEEDS)
def test_positive_and_bounded_floats(seed):
    case = custom("pos", [(1000,), (1000,)], "float16", seed=seed,
                  kinds=(positive(), bounded(-0.5, 0.25)))
    pos, box = make_inputs(case, "cpu")
    assert pos.dtype == box.dtype == torch.float16
    assert bool((pos > 0).all())
    assert bool(((box >= -0.5) & (box < 0.25)).all())


def test_a_seed_means_the_same_inputs_and_another_seed_others():
    def case(seed):
        return custom("csr", [(100, 2), (11,)], input_dtypes=("float32", "int64"), seed=seed,
                      kinds=(None, offsets((0, 0))))

    first, again, other = (make_inputs(case(s), "cpu") for s in (4, 4, 5))
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not torch.equal(first[1], other[1])


def test_an_input_function_gets_a_seeded_cpu_generator_and_is_checked():
    seen = []

    def make(generator, dtype, device):
        seen.append((generator.device.type, dtype, device))
        return torch.randn(3, 2, generator=generator, dtype=dtype), torch.tensor([0, 1, 3])

    case = custom("own", [(3, 2), (3,)], input_dtypes=("float64", "int64"), dtype="float64",
                  inputs=make, seed=9)
    x, offs = make_inputs(case, "cpu")
    assert seen == [("cpu", torch.float64, "cpu")]
    assert torch.equal(x, torch.randn(3, 2, generator=torch.Generator().manual_seed(9),
                                      dtype=torch.float64))
    wrong = custom("own", [(3, 3), (3,)], input_dtypes=("float64", "int64"), dtype="float64",
                   inputs=make)
    with pytest.raises(ValueError, match=r"input 0 is float64 \(3, 2\); the case says "
                                         r"float64 \(3, 3\)"):
        make_inputs(wrong, "cpu")


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(kinds=(offsets(5),)), r"2 inputs? |1 kinds for 2 inputs"),
        (dict(kinds=(positive(), offsets(5))), r"input 1 is float32; offsets needs an integer"),
        (dict(kinds=(offsets(5), None), input_dtypes=("int64", "float32")), r"offsets are 1-D"),
        (
            dict(kinds=(None, indices((3, 0))), input_dtypes=("float32", "int64")),
            r"\(3, 0\) names no input dimension",
        ),
        (dict(kinds=(None, bounded(1, 1))), r"bounded needs low < high"),
        (dict(kinds=(None, "sorted")), r"kinds\[1\] is 'sorted', not an input kind"),
        (dict(kinds=(None, None), inputs=lambda g, d, v: ()), r"inputs= or kinds=, not both"),
    ],
)
def test_a_kind_that_cannot_fill_its_input_is_one_line(options, message):
    with pytest.raises(ValueError, match=message):
        Case("bad", ((4, 2), (4,)), **options)
