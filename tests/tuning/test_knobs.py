"""Declared knobs (``@portkit.op(knobs=...)``) and the choice of a configuration: the
declaration's errors, ``portkit.knobs(k, x)``'s errors, the table lookup by GPU name and
shape bucket with its fallback to the defaults, and the table file's errors."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

import portkit
from portkit.errors import OpDefinitionError, PortkitError
from portkit.project.cases import custom
from portkit.runtime.knob_choice import KnobChoice, bucket, knobs

DECLARED = {"threads": [128, 256, 64], "per_sm": [2, 4]}


def _op(**options):
    @portkit.op(reference=lambda x: x, cases=[custom("n4", [(4,)])], **options)
    class Op:
        def forward(k, x):
            return x, ()

    return Op.__portkit_op__


def _table(entries):
    return {"format": 1, "op": "op", "knobs": DECLARED, "gpus": entries}


# -- the declaration -----------------------------------------------------------------------


def test_declared_knobs_keep_their_order_and_values():
    definition = _op(knobs=DECLARED)
    assert definition.knobs == (("threads", (128, 256, 64)), ("per_sm", (2, 4)))
    assert _op().knobs == ()


@pytest.mark.parametrize(
    ("knobs_", "message"),
    [
        ({"threads": []}, "knob threads lists no values"),
        ({"threads": [128, 128]}, "lists a value twice"),
        ({"threads": 128}, "takes a list of values"),
        ({"threads": "128"}, "takes a list of values"),
        ({"not a name": [1]}, "is not a Python identifier"),
        ({"threads": [None]}, "values are ints, floats, bools or strings"),
        ([("threads", [1])], r"knobs= takes \{name: \[values"),
    ],
)
def test_a_bad_declaration_is_a_one_line_error(knobs_, message):
    with pytest.raises(OpDefinitionError, match=message):
        _op(knobs=knobs_)


# -- portkit.knobs(k, x) -------------------------------------------------------------------


def test_defaults_are_each_knobs_first_value():
    choice = KnobChoice("op", DECLARED, None, OpDefinitionError)
    k = SimpleNamespace(op="op", knob_choice=choice)
    kn = knobs(k, torch.zeros(3, 4))
    assert (kn.threads, kn["per_sm"], kn.label) == (128, 2, "defaults")


def test_an_unknown_knob_names_the_declared_ones():
    k = SimpleNamespace(op="op", knob_choice=KnobChoice("op", DECLARED, None, OpDefinitionError))
    with pytest.raises(
        OpDefinitionError, match="op op has no knob 'thread'; it declares per_sm, threads"
    ):
        _ = knobs(k, torch.zeros(2)).thread


def test_a_pinned_value_outside_the_declared_set_is_refused():
    choice = KnobChoice("op", DECLARED, None, OpDefinitionError)
    with pytest.raises(
        OpDefinitionError, match=r"knob threads=512 of op op is not among .*\[128, 256, 64\]"
    ):
        choice.pinned({"threads": 512})
    with pytest.raises(OpDefinitionError, match="has no knob 'warps'"):
        choice.pinned({"warps": 4})
    with pytest.raises(OpDefinitionError, match="not among"):  # True == 1, but not a knob value
        KnobChoice("op", {"flag": [1, 2]}, None, OpDefinitionError).pinned({"flag": True})


def test_pinned_completes_with_defaults_whatever_the_tensor():
    choice = KnobChoice("op", DECLARED, None, OpDefinitionError).pinned({"per_sm": 4})
    for tensor in (None, torch.zeros(8, 8), torch.zeros(1, dtype=torch.bfloat16)):
        assert choice.values(tensor).as_dict() == {"threads": 128, "per_sm": 4}


def test_a_k_without_knobs_says_the_op_declares_none():
    with pytest.raises(AttributeError, match="it declares none"):
        _ = knobs(SimpleNamespace(op="op", knob_choice=None), torch.zeros(1)).threads


# -- the table: GPU name and shape bucket, else the defaults -------------------------------


def test_bucket_rounds_each_dimension_to_the_nearest_power_of_two():
    assert bucket("bfloat16", (16384, 4096)) == "bfloat16-16384x4096"
    assert bucket("float32", (16000, 4000)) == "float32-16384x4096"
    assert bucket("float32", (2500, 1)) == "float32-2048x1"  # nearest in log2
    assert bucket("float32", (3000, 1)) == "float32-4096x1"
    assert bucket("float32", (0, 5)) == "float32-0x4"
    assert bucket("float32", ()) == "float32-scalar"


class _CudaLike:
    """What the lookup reads of a tensor: device, dtype and shape (no GPU needed)."""

    def __init__(self, shape, dtype=torch.float32, index=0):
        self.shape, self.dtype = shape, dtype
        self.device = SimpleNamespace(type="cuda", index=index)


def _choice_on(gpu_names, entries):
    choice = KnobChoice("op", DECLARED, _table(entries), OpDefinitionError)
    choice._device_name = lambda tensor: gpu_names[tensor.device.index]
    return choice


def test_the_entry_of_this_gpu_and_bucket_is_picked():
    entries = {
        "NVIDIA H200": {"float32-4096x4096": {"config": {"threads": 256, "per_sm": 4}}},
        "NVIDIA H100 80GB HBM3": {"float32-4096x4096": {"config": {"threads": 64}}},
    }
    choice = _choice_on({0: "NVIDIA H200", 1: "NVIDIA H100 80GB HBM3"}, entries)
    on_h200 = choice.values(_CudaLike((4000, 4096)))
    assert on_h200.as_dict() == {"threads": 256, "per_sm": 4}
    assert on_h200.label == "tuned for NVIDIA H200, float32-4096x4096"
    assert choice.values(_CudaLike((4096, 4096), index=1)).as_dict() == {"threads": 64, "per_sm": 2}


class _Traced:
    """A traced dimension as torch.compile's dynamic shapes give it: it converts to its
    example size but, like a SymInt, does not hash."""

    __hash__ = None  # type: ignore[assignment]

    def __init__(self, size):
        self.size = size

    def __int__(self):
        return self.size


def test_a_traced_shape_picks_the_entry_of_its_example_sizes():
    # opcheck's test_aot_dispatch_dynamic on an H100 (2026-11-27): "unhashable type:
    # non-nested SymInt" from the lookup, in every knobbed op
    entries = {"NVIDIA H200": {"float32-4096x4096": {"config": {"threads": 256}}}}
    choice = _choice_on({0: "NVIDIA H200"}, entries)
    traced = choice.values(_CudaLike((_Traced(4000), _Traced(4096))))
    assert traced.as_dict() == choice.values(_CudaLike((4000, 4096))).as_dict()
    assert traced.as_dict()["threads"] == 256


def test_another_gpu_bucket_dtype_or_device_falls_back_to_the_defaults():
    entries = {"NVIDIA H200": {"float32-4096x4096": {"config": {"threads": 256}}}}
    choice = _choice_on({0: "NVIDIA H200", 1: "NVIDIA A100"}, entries)
    assert choice.values(_CudaLike((4096, 4096), index=1)).label == "defaults"
    assert choice.values(_CudaLike((512, 4096))).label == "defaults"
    assert choice.values(_CudaLike((4096, 4096), torch.bfloat16)).label == "defaults"
    assert choice.values(torch.zeros(4096, 16)).label == "defaults"  # a CPU tensor
    assert choice.values(None).label == "defaults"


def test_configurations_are_the_defaults_then_each_distinct_tuned_one():
    entries = {
        "A": {"float32-8x8": {"config": {"threads": 256}}, "float32-16x8": {"config": {}}},
        "B": {
            "float32-8x8": {"config": {"threads": 256}},
            "float32-4x4": {"config": {"per_sm": 4}},
        },
    }
    choice = KnobChoice("op", DECLARED, _table(entries), OpDefinitionError)
    got = [c.as_dict() for c in choice.configurations()]
    assert got == [
        {"threads": 128, "per_sm": 2},
        {"threads": 256, "per_sm": 2},
        {"threads": 128, "per_sm": 4},
    ]


def test_a_table_entry_outside_the_declaration_is_a_one_line_error():
    entries = {"A": {"float32-8x8": {"config": {"threads": 1024}}}}
    with pytest.raises(OpDefinitionError, match=r"tuned for A, float32-8x8: knob threads=1024"):
        KnobChoice("op", DECLARED, _table(entries), OpDefinitionError)
    with pytest.raises(OpDefinitionError, match="format 7, not 1"):
        KnobChoice("op", DECLARED, {"format": 7, "gpus": {}}, OpDefinitionError)


# -- the table file ------------------------------------------------------------------------


def test_the_project_table_is_read_and_merged_per_gpu(tmp_path):
    from portkit.project.tuning_table import merge_results, read_table

    op = SimpleNamespace(name="op", definition=SimpleNamespace(knobs=tuple(
        (n, tuple(v)) for n, v in DECLARED.items()
    )))  # fmt: skip
    path = tmp_path / "tuning" / "op.json"
    assert read_table(path) is None
    merge_results(path, op, "B", {"float32-8x8": {"config": {"threads": 64}, "us": 1.0}})
    merge_results(path, op, "A", {"float32-8x8": {"config": {"threads": 256}, "us": 2.0}})
    merge_results(path, op, "A", {"float32-4x4": {"config": {"per_sm": 4}, "us": 3.0}})
    table = json.loads(path.read_text())
    assert table["knobs"] == DECLARED and table["op"] == "op"
    assert sorted(table["gpus"]) == ["A", "B"]
    assert sorted(table["gpus"]["A"]) == ["float32-4x4", "float32-8x8"]
    configurations = KnobChoice("op", DECLARED, table, OpDefinitionError).configurations()
    # a knob declared since: every entry stays, the new knob at its default (the kernel's
    # old behaviour, as the runtime reads an entry without it)
    grown = SimpleNamespace(name="op", definition=SimpleNamespace(knobs=tuple(
        (n, tuple(v)) for n, v in {**DECLARED, "math": ["float64", "float32"]}.items()
    )))  # fmt: skip
    merged = merge_results(path, grown, "A", {"float32-2x2": {"config": {"math": "float32"}}})
    assert merged["dropped"] == [] and sorted(merged["gpus"]) == ["A", "B"]
    assert merged["gpus"]["B"]["float32-8x8"]["config"] == {"threads": 64, "per_sm": 2,
                                                           "math": "float64"}  # fmt: skip
    assert merged["gpus"]["B"]["float32-8x8"]["us"] == 1.0
    assert sorted(merged["gpus"]["A"]) == ["float32-2x2", "float32-4x4", "float32-8x8"]
    # knobs or values no longer declared: those entries are dropped, the GPUs named
    changed = SimpleNamespace(name="op", definition=SimpleNamespace(knobs=(("threads", (64,)),)))
    merged = merge_results(path, changed, "A", {"float32-8x8": {"config": {}, "us": 1.0}})
    assert merged["dropped"] == ["A", "B"]
    assert merged["gpus"] == {"A": {"float32-8x8": {"config": {}, "us": 1.0}}}
    assert json.loads(path.read_text())["knobs"] == {"threads": [64]}
    assert [(c.threads, c.per_sm) for c in configurations] == [
        (128, 2),
        (128, 4),
        (256, 2),
        (64, 2),
    ]


def test_a_table_that_is_not_json_names_the_file(tmp_path):
    from portkit.project.tuning_table import read_table

    path = tmp_path / "op.json"
    path.write_text("{not json")
    with pytest.raises(PortkitError, match=r"op.json: not JSON"):
        read_table(path)
    path.write_text('{"gpus": []}')
    with pytest.raises(PortkitError, match="not a portkit tuning table"):
        read_table(path)


def test_the_table_choice_is_kept_by_content_and_bounded(tmp_path, monkeypatch):
    """``knob_choice`` keys on what a choice is made of (the table file and the knobs
    declared), not on an op object's id: an op imported again unchanged gets the same
    choice, an edited declaration a new one (an id, reused by the edited op, once served
    the old one), and a resident process keeps the last ``MAX_CHOICES`` only."""
    from portkit.project import tuning_table

    monkeypatch.setattr(tuning_table, "_choices", type(tuning_table._choices)())
    config = SimpleNamespace(root=tmp_path)

    def op(knobs: dict) -> SimpleNamespace:
        return SimpleNamespace(name="op", definition=SimpleNamespace(knobs=knobs))

    first = tuning_table.knob_choice(op({"threads": (64, 128)}), config)
    assert tuning_table.knob_choice(op({"threads": (64, 128)}), config) is first
    edited = tuning_table.knob_choice(op({"threads": (256, 64)}), config)
    assert edited is not first and edited.defaults.as_dict() == {"threads": 256}
    for n in range(2 * tuning_table.MAX_CHOICES):
        tuning_table.knob_choice(op({"threads": (n,)}), config)
    assert len(tuning_table._choices) == tuning_table.MAX_CHOICES
