"""Cases as data, the [tool.portkit] table, and discovery's pairing of prototypes and twins."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

import portkit
from portkit.errors import OpDefinitionError, OpNotFound
from portkit.project.cases import (
    EDGE_SIZES,
    LARGE_SIZE,
    TOO_LARGE,
    Case,
    custom,
    elementwise,
    grad_outputs_kept,
    make_grad_outputs,
    make_inputs,
    rows,
)
from portkit.project.config import default_cache_dir, find_project_root, load_config
from portkit.project.discovery import discover
from portkit.project.session import Session

# -- cases -----------------------------------------------------------------------------------


def test_elementwise_defaults():
    cases = elementwise()
    by_name = {c.name: c for c in cases}
    assert len(by_name) == len(cases)
    assert EDGE_SIZES == (0, 1, 127, 128, 129, 1000)
    for dtype in ("float32", "float64"):
        for n in (0, 1, 127, 128, 129, 1000):
            case = by_name[f"{dtype}-n{n}"]
            assert case.shapes == ((n,),)
            assert case.dtype == dtype
            assert not case.large and not case.gpu_only and not case.gradcheck
    large = [c for c in cases if c.large]
    assert [c.name for c in large] == [f"float32-n{LARGE_SIZE}"]
    assert large[0].shapes == ((LARGE_SIZE,),) and large[0].dtype == "float32"
    assert not any(c.gpu_only for c in cases)  # the simulator runs the large case too
    gradcheck = [c for c in cases if c.gradcheck]
    assert [(c.name, c.dtype, c.gpu_only) for c in gradcheck] == [
        ("float64-gradcheck", "float64", False)
    ]
    assert len(cases) == 2 * 6 + 2
    # seeds differ between sizes, so equal-looking inputs are not reused
    assert len({by_name[f"float32-n{n}"].seed for n in EDGE_SIZES}) == 6


def test_elementwise_options():
    cases = elementwise(inputs=2, sizes=(5,), dtypes=("float64",), special=(1.0, 2.0), large=None)
    assert [c.name for c in cases] == ["float64-n5", "float64-special", "float64-gradcheck"]
    assert all(len(c.shapes) == 2 for c in cases)
    special = cases[1]
    assert special.special == (1.0, 2.0) and special.shapes == ((8,), (8,))


def test_rows_defaults():
    cases = rows()
    names = [c.name for c in cases]
    assert "float32-3x127" in names and "float64-2x129" in names
    assert [c.name for c in cases if c.large] == ["float32-4096x4096"]
    assert not any(c.gpu_only for c in cases)
    (gc,) = [c for c in cases if c.gradcheck]
    assert gc.shapes == ((2, 3),) and gc.dtype == "float64"


def test_gpu_only_says_why():
    assert Case("a", ((4,),), gpu_only=True).gpu_only_reason == TOO_LARGE
    assert Case("b", ((4,),), gpu_only="needs tensor cores").gpu_only_reason == "needs tensor cores"
    assert Case("c", ((4,),), large=True).gpu_only_reason == ""


def test_custom_case():
    case = custom("wide", [[2, 4096]], "float64", seed=5, extra=(1.5,))
    assert case == Case("wide", ((2, 4096),), "float64", 5, extra=(1.5,))
    assert case.numel == 8192


def test_make_inputs_deterministic():
    case = Case("c", ((50,), (50,)), "float32", seed=11)
    first, second = make_inputs(case, "cpu"), make_inputs(case, "cpu")
    assert all(torch.equal(a, b) for a, b in zip(first, second))
    assert not torch.equal(first[0], first[1])  # two draws, not one tensor twice
    other = make_inputs(Case("c", ((50,), (50,)), "float32", seed=12), "cpu")
    assert not torch.equal(first[0], other[0])
    assert first[0].dtype == torch.float32 and first[0].device.type == "cpu"
    assert make_inputs(Case("d", ((3, 4),), "float64"), "cpu")[0].dtype == torch.float64


def test_make_inputs_matches_seeded_generator():
    case = Case("c", ((6,),), "float64", seed=3)
    expected = torch.randn((6,), dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    assert torch.equal(make_inputs(case, "cpu")[0], expected)


def same(values, expected) -> bool:
    return all(
        (math.isnan(a) and math.isnan(b)) or a == b for a, b in zip(values, expected, strict=True)
    )


def test_make_inputs_tiles_special_values():
    special = (math.inf, math.nan, -1.5)
    case = Case("s", ((12,), (12,)), "float32", seed=2, special=special)
    a, b = make_inputs(case, "cpu")
    assert same(a[:9].tolist(), list(special) * 3)
    rolled = [special[-1], special[0], special[1]]  # rolled by the input's index
    assert same(b[:9].tolist(), rolled * 3)
    assert torch.isfinite(a[9:]).all()  # the rest stays random
    plain = make_inputs(Case("s", ((12,), (12,)), "float32", seed=2), "cpu")
    assert torch.equal(a[9:], plain[0][9:])


def test_make_inputs_special_short_and_empty():
    (x,) = make_inputs(Case("s", ((2,),), "float64", special=(7.0, 8.0, 9.0)), "cpu")
    assert x.tolist() == [7.0, 8.0]
    (empty,) = make_inputs(Case("e", ((0,),), "float32", special=(1.0,)), "cpu")
    assert empty.numel() == 0


def test_make_grad_outputs_deterministic():
    case = Case("c", ((5,),), "float64", seed=4)
    outputs = [torch.zeros(5, dtype=torch.float64)]
    a, b = make_grad_outputs(case, outputs), make_grad_outputs(case, outputs)
    assert torch.equal(a[0], b[0]) and a[0].dtype == torch.float64
    assert not torch.equal(a[0], make_inputs(case, "cpu")[0])


def test_grad_outputs_kept_draws_once_and_hands_out_copies(randn_seeds):
    case = Case("c", ((5,),), "float32", seed=4)
    outputs = [torch.zeros(5), torch.zeros(3, dtype=torch.float64)]
    unkept = make_grad_outputs(case, outputs)
    draws = randn_seeds
    draws.clear()  # from here on
    with grad_outputs_kept():
        first = make_grad_outputs(case, outputs)
        first[0].fill_(7.0)  # a kernel writing its upstream gradient spoils no other run
        second = make_grad_outputs(case, outputs)
        other_seed = make_grad_outputs(Case("c", ((5,),), "float32", seed=5), outputs)
    assert len(draws) == 4  # two outputs for seed 4, two for seed 5: never seed 4 again
    assert all(torch.equal(s, u) for s, u in zip(second, unkept))
    assert not torch.equal(other_seed[0], unkept[0])
    make_grad_outputs(case, outputs)  # outside the block nothing is kept: drawn again
    assert len(draws) == 6


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"dtype": "float8"}, "dtype 'float8' is not one of"),
        ({"dtype": "complex64"}, "dtype 'complex64' is not one of"),
        ({"input_dtypes": ("float32", "int32")}, "2 input dtypes for 1 input shapes"),
        ({"gradcheck": True}, "gradcheck needs float64, not float32"),
        ({"shapes": ()}, "needs at least one input shape"),
        ({"shapes": ((-1,),)}, "must be non-negative ints"),
        ({"shapes": ((2.0,),)}, "must be non-negative ints"),
    ],
)
def test_case_validation(kwargs, words):
    options = {"name": "bad", "shapes": ((3,),), **kwargs}
    with pytest.raises(ValueError) as info:
        Case(**options)
    assert "case 'bad'" in str(info.value)
    assert words in str(info.value)


def test_gradcheck_float64_is_fine():
    assert Case("ok", ((3,),), "float64", gradcheck=True).gradcheck


@pytest.mark.parametrize(
    "options, words",
    [
        ({"cases": []}, "cases must name at least one portkit Case"),
        ({"cases": ["x"]}, "cases holds 'x', not a portkit Case"),
        ({"cases": [custom("a", [(1,)]), custom("a", [(2,)])]}, "case names repeat: a"),
        (
            {"cases": [custom("a", [(1,)], "float64")], "dtypes": ["float32"]},
            "a dtype the op does not accept; it takes float32 (declare the dtypes it takes: "
            "@portkit.op(dtypes=('float32', 'float64'), ...))",
        ),
        (  # the generators' gradcheck case is float64 whatever their dtypes say
            {"cases": rows(shapes=[(2, 3)], dtypes=["float32"]), "dtypes": ["float32"]},
            "case 'float64-gradcheck': input 0 is float64, a dtype the op does not accept; "
            "it takes float32 (declare the dtypes it takes: @portkit.op(dtypes=('float32', "
            "'float64'), ...); or, for an op without float64, leave it out: gradcheck=False)",
        ),
        ({"cases": [custom("a", [(1,)])], "dtypes": ["bfloat8"]}, "dtypes ['bfloat8'] unknown"),
        (
            {"cases": [custom("a", [(1,), (1,)])], "input_dtypes": [None, "int64"]},
            "input 1 is float32; the op takes int64 there",
        ),
        ({"cases": [custom("a", [(1,)])], "reference": 3}, "reference must be callable"),
    ],
)
def test_op_definition_validation(options, words):
    options.setdefault("reference", abs)

    with pytest.raises(OpDefinitionError) as info:

        @portkit.op(**options)
        class Bad:
            def forward(k, x):
                return x, ()

    assert "@portkit.op class Bad" in str(info.value)
    assert words in str(info.value)
    if "there" in words:  # a fixed dtype refused: a dtypes= hint would not help
        assert str(info.value).endswith(words)


def test_op_definition_needs_forward_signature():
    with pytest.raises(OpDefinitionError, match=r"forward must take \(k, \*inputs\)"):

        @portkit.op(reference=abs, cases=[custom("a", [(1,)])])
        class NoInputs:
            def forward(k):
                return None

    with pytest.raises(OpDefinitionError, match="needs forward"):

        @portkit.op(reference=abs, cases=[custom("a", [(1,)])])
        class NoForward:
            pass

    with pytest.raises(OpDefinitionError, match=r"backward must take \(k, saved, \*grad_outputs\)"):

        @portkit.op(reference=abs, cases=[custom("a", [(1,)])])
        class ShortBackward:
            def forward(k, x):
                return x, ()

            def backward(k, saved):
                return ()


def test_op_definition_accepts_staticmethods():
    @portkit.op(reference=abs, cases=[custom("a", [(1,)])])
    class Static:
        @staticmethod
        def forward(k, x):
            return x, ()

    definition = Static.__portkit_op__
    assert definition.forward(None, 5) == (5, ())
    assert not definition.has_backward
    assert definition.dtypes == ("float32", "float64") and definition.same_shape


def test_cdiv():
    assert [portkit.cdiv(n, 32) for n in (0, 1, 32, 33, 129)] == [0, 1, 1, 2, 5]


# -- config ------------------------------------------------------------------------------------


def test_find_project_root_walks_up(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    assert find_project_root(deep) == tmp_path.resolve()
    nested = tmp_path / "a" / "pyproject.toml"
    nested.write_text("")
    assert find_project_root(deep) == (tmp_path / "a").resolve()  # the nearest wins
    assert find_project_root(tmp_path / "a") == (tmp_path / "a").resolve()


def test_load_config_defaults(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    sub = tmp_path / "deep" / "er"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    config = load_config()
    root = tmp_path.resolve()
    assert config.root == root
    assert config.prototypes_dir == root / "prototypes"
    assert config.cuda_src_dir == root / "cuda_src"
    assert config.cache_dir == tmp_path / "xdg" / "portkit"
    assert default_cache_dir() == tmp_path / "xdg" / "portkit"


def test_default_cache_dir_without_xdg(monkeypatch):
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert default_cache_dir() == Path.home() / ".cache" / "portkit"


def test_config_overrides(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.portkit]\nprototypes = "ops/py"\ncuda-src = "ops/cu"\ncache-dir = "build/twins"\n'
    )
    config = load_config(tmp_path)
    root = tmp_path.resolve()
    assert config.prototypes_dir == root / "ops" / "py"
    assert config.cuda_src_dir == root / "ops" / "cu"
    assert config.cache_dir == root / "build" / "twins"


def test_cache_dir_override_is_used_by_compile(make_project, sources, cli):
    root = make_project(
        {
            "cfg_cache": (
                sources.unary_op("cfg_cache", cases=sources.ONE_CASE),
                sources.unary_twin("cfg_cache"),
            )
        },
        portkit_table='cache-dir = "my-cache"\n',
    )
    result = cli(root, "compile", "cfg_cache")
    assert result.exit_code == 0, result.output
    cubins = list((root / "my-cache" / "twins").glob("cfg_cache-sm_90-*.cubin"))
    assert len(cubins) == 1
    assert "cubin from NVRTC" in result.output
    again = cli(root, "compile", "cfg_cache")
    assert again.exit_code == 0 and "cubin from cache" in again.output


# -- discovery ---------------------------------------------------------------------------------


def test_discovery_pairs_twins_by_name(make_project, sources):
    root = make_project(
        {
            "disc_pair": (
                sources.unary_op("disc_pair", cases=sources.ONE_CASE),
                sources.unary_twin("disc_pair"),
            ),
            "disc_alone": (sources.unary_op("disc_alone", cases=sources.ONE_CASE), None),
            "disc_orphan": (None, sources.unary_twin("disc_orphan")),
        },
        files={"prototypes/_helpers.py": "raise RuntimeError('never imported')\n"},
    )
    catalog = discover(load_config(root))
    root = root.resolve()
    assert sorted(catalog.ops) == ["disc_alone", "disc_pair"]
    pair = catalog.get("disc_pair")
    assert pair.twin_path.resolve() == root / "cuda_src" / "disc_pair.cu"
    assert pair.has_twin and pair.prototype_path.name == "disc_pair.py"
    assert set(pair.kernels) == {"disc_pair_fwd"}
    assert catalog.get("disc_alone").twin_path is None
    assert not catalog.get("disc_alone").has_twin

    assert "disc_orphan" in catalog.broken and "_helpers" not in catalog.names
    assert "disc_orphan.cu has no prototype" in catalog.broken["disc_orphan"]
    assert "prototypes/disc_orphan.py" in catalog.broken["disc_orphan"]
    assert catalog.names == ["disc_alone", "disc_orphan", "disc_pair"]
    with pytest.raises(OpDefinitionError, match="disc_orphan cannot be loaded"):
        catalog.get("disc_orphan")
    with pytest.raises(OpNotFound) as info:
        catalog.get("nope")
    assert info.value.known == ["disc_alone", "disc_orphan", "disc_pair"]


def test_a_session_keeps_its_catalog_and_discover_memoises_nothing(make_project, sources):
    root = make_project(
        {"disc_cached": (sources.unary_op("disc_cached", cases=sources.ONE_CASE), None)}
    )
    config = load_config(root)
    assert discover(config) is not discover(config)  # no process-wide memo
    session = Session.of(config)
    op = session.op("disc_cached")
    assert session.op("disc_cached") is op and session.catalog.get("disc_cached") is op
    assert Session.of(config).op("disc_cached") is not op
    assert op.kernels["disc_cached_fwd"].py_func.__module__ == "portkit_ops.disc_cached"
    assert op.case("float32-n129").shapes == ((129,),)
    with pytest.raises(portkit.PortkitError, match="has no case 'x'; cases: float32-n129"):
        op.case("x")


def test_discovery_ignores_imported_kernels_and_device_functions(make_project, sources):
    helper = """\
from numba import cuda


@cuda.jit
def shared_kernel(x):
    pass


@cuda.jit(device=True)
def shared_device(v):
    return v
"""
    py = sources.unary_op("disc_imp", cases=sources.ONE_CASE).replace(
        "import portkit\n",
        "import portkit\nfrom disc_imp_helpers import shared_device, shared_kernel\n",
    )
    root = make_project({"disc_imp": (py, None)}, files={"disc_imp_helpers.py": helper})
    import sys

    sys.path.insert(0, str(root))
    try:
        op = discover(load_config(root)).get("disc_imp")
    finally:
        sys.path.remove(str(root))
        sys.modules.pop("disc_imp_helpers", None)
    assert set(op.kernels) == {"disc_imp_fwd"}


def test_missing_folders_mean_no_ops(tmp_path, cli):
    (tmp_path / "pyproject.toml").write_text("[tool.portkit]\n")
    catalog = discover(load_config(tmp_path))
    assert catalog.names == []
    result = cli(tmp_path, "list")
    assert result.exit_code == 0
    assert "no ops found in" in result.output


def test_portkit_load_uses_current_project(make_project, sources, monkeypatch):
    root = make_project(
        {"disc_load": (sources.unary_op("disc_load", cases=sources.ONE_CASE), None)}
    )
    monkeypatch.chdir(root)
    f = portkit.load("disc_load", "sim")
    assert torch.equal(f(torch.arange(4.0)), torch.arange(4.0) * 2)
    with pytest.raises(portkit.PortkitError) as info:
        portkit.load("disc_load", "twin")
    assert "twin cannot run op disc_load" in str(info.value)
