"""The launch contract (portkit/runtime/launch_contract.py): standard library only, the one
definition of the launch errors, limits and dtype tables in portkit, and what it says."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import portkit
import portkit.errors
from portkit.project.dtypes import DTYPES
from portkit.runtime import launch_contract as contract
from portkit.runtime.launch_contract import LaunchError, TwinKernel, TwinParam, launch_config

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "portkit" / "runtime" / "launch_contract.py"
ERRORS = ("PortkitError", "OpDefinitionError", "InputError", "LaunchError")


def test_it_imports_the_standard_library_only_at_module_level() -> None:
    tree = ast.parse(SOURCE.read_text())
    roots = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            roots.add((node.module or "").split(".")[0])
    assert roots and roots <= set(sys.stdlib_module_names) | {"__future__"}, roots


def test_it_loads_and_answers_where_torch_numpy_and_portkit_cannot_import() -> None:
    script = f"""
import importlib.abc, importlib.util, json, sys

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("portkit", "torch", "numpy", "numba"):
            raise ImportError(name)

sys.meta_path.insert(0, Block())
spec = importlib.util.spec_from_file_location("shipped_contract", {str(SOURCE)!r})
c = importlib.util.module_from_spec(spec)
sys.modules["shipped_contract"] = c
spec.loader.exec_module(c)

class K:
    device, implementation, kind = "cpu", "sim", c.KernelsKind.SIMULATED

print(json.dumps({{"config": c.launch_config(((2, 3), 64, 128), "k").grid,
                  "sm": c.sm_count(K()), "cdiv": c.cdiv(1000, 256),
                  "value_error": issubclass(c.InputError, ValueError)}}))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "config": [2, 3, 1],
        "sm": contract.SIMULATED_SM_COUNT,
        "cdiv": 4,
        "value_error": True,
    }


def test_portkit_s_errors_are_the_contract_s_classes() -> None:
    for name in ERRORS:
        assert getattr(portkit.errors, name) is getattr(contract, name)
    assert portkit.InputError is contract.InputError
    assert portkit.LaunchError is contract.LaunchError
    assert portkit.cdiv is contract.cdiv and portkit.sm_count is contract.sm_count
    # portkit's own errors still derive from them
    assert issubclass(portkit.errors.DtypeError, contract.OpDefinitionError)
    assert issubclass(portkit.errors.KernelError, contract.PortkitError)


def test_input_error_is_a_value_error_and_a_portkit_error() -> None:
    error = contract.InputError("op x, input 0: dtype torch.int8")
    assert isinstance(error, ValueError) and isinstance(error, portkit.errors.PortkitError)
    assert str(error) == "op x, input 0: dtype torch.int8"
    assert not issubclass(contract.LaunchError, ValueError)


def _assigned_names(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        names |= {t.id for t in targets if isinstance(t, ast.Name)}
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
    return names


def test_no_other_module_keeps_a_copy_of_the_contract() -> None:
    """The tables, limits, errors and checks are defined once, in the contract."""
    owned = {
        *ERRORS,
        "C_SCALAR_OF_DTYPE",
        "DTYPE_OF_C_SCALAR",
        "SCALAR_TYPES",
        "POINTER_ONLY_TYPES",
        "MAX_THREADS_PER_BLOCK",
        "MAX_BLOCK_DIMS",
        "MAX_GRID_DIMS",
        "MAX_SHARED_BYTES",
        "MAX_CACHED_CONFIGS",
        "launch_config",
        "cacheable_config",
        "template_types",
        "not_compiled",
        "cdiv",
        "sm_count",
    }
    assert owned <= _assigned_names(ast.parse(SOURCE.read_text()))
    copies = {
        str(path.relative_to(REPO)): sorted(found)
        for path in (REPO / "portkit").rglob("*.py")
        if path != SOURCE and (found := owned & _assigned_names(ast.parse(path.read_text())))
    }
    assert copies == {}


@pytest.mark.parametrize(
    "config, message",
    [
        (
            (1, 1025),
            "block (1025, 1, 1) asks for 1025 threads per block; a GPU allows at most 1024 "
            "(CUDA_ERROR_INVALID_VALUE on a GPU)",
        ),
        ((1, (1, 1, 65)), "block dimension z=65 > 64 (CUDA_ERROR_INVALID_VALUE on a GPU)"),
        ((1, (0, 32)), "block (0, 32, 1) has a dimension below 1"),
        ((0, 32), "grid (0, 1, 1) has a dimension below 1, which a GPU rejects"),
        ((2**31, 32), f"grid dimension x={2**31} > {2**31 - 1} (CUDA_ERROR_INVALID_VALUE"),
        (((1, 1, 65536), 32), "grid dimension z=65536 > 65535"),
        ((1, 32, contract.MAX_SHARED_BYTES + 1), "bytes of dynamic shared memory; the range"),
        ((1, 32, -1), "-1 bytes of dynamic shared memory"),
        ((1.0, 32), "grid must be an int or 1-3 ints, got 1.0"),
        ((True, 32), "grid must be an int or 1-3 ints, got True"),
        ((1,), "launch as k.kern[grid, block] or k.kern[grid, block, shared_bytes]"),
    ],
)
def test_launch_configurations_a_gpu_rejects_are_refused(config, message) -> None:
    with pytest.raises(LaunchError) as info:
        launch_config(config, "kern")
    assert message in str(info.value)
    assert str(info.value).startswith("kernel kern: ")


def test_the_limits_themselves_are_accepted() -> None:
    config = launch_config(
        ((2**31 - 1, 65535, 65535), (1024, 1, 1), contract.MAX_SHARED_BYTES), "k"
    )
    assert config.grid == (2**31 - 1, 65535, 65535) and config.threads_per_block == 1024
    assert launch_config((3, (8, 8, 16)), "k").block == (8, 8, 16)
    assert launch_config((3, 32), "k").shared_bytes == 0


def test_dimensions_are_whatever_speaks_the_index_protocol() -> None:
    """``operator.index``, not an attribute's presence: NumPy integers and integer
    tensors of one element are dimensions; a float tensor, which has ``__index__`` too
    and raises from it, is refused instead of truncated (it once launched 2 for 2.7)."""
    import numpy as np
    import torch

    config = launch_config(((np.int64(4), torch.tensor(2)), np.int32(32)), "k")
    assert config.grid == (4, 2, 1) and config.block == (32, 1, 1)
    assert all(type(d) is int for d in (*config.grid, *config.block))
    for grid in [torch.tensor(2.7), np.float32(2.0), np.bool_(True), (4, torch.tensor([1, 2]))]:
        with pytest.raises(LaunchError, match="grid must be an int or 1-3 ints"):
            launch_config((grid, 32), "k")


def test_only_plain_int_configurations_key_a_cache() -> None:
    assert contract.cacheable_config((4, 32))
    assert contract.cacheable_config(((4, 2), (32, 4), 0))
    for config in [(True, 32), (4.0, 32), ((4, 2.0), 32), [4, 32], (4, [32])]:
        assert not contract.cacheable_config(config), config


def test_every_portkit_dtype_has_a_c_type_and_back() -> None:
    assert set(contract.C_SCALAR_OF_DTYPE) == set(DTYPES)
    for dtype, ctype in contract.C_SCALAR_OF_DTYPE.items():
        assert contract.DTYPE_OF_C_SCALAR[ctype] == dtype
    assert contract.C_SCALAR_OF_DTYPE["float16"] == "__half"
    assert contract.C_SCALAR_OF_DTYPE["bfloat16"] == "__nv_bfloat16"
    # Every fixed C type a pointer may have names a torch dtype (unsigned*: torch.uint32).
    import torch

    for ctype, dtype in contract.DTYPE_OF_C_SCALAR.items():
        assert isinstance(getattr(torch, dtype, None), torch.dtype), ctype


KERNEL = TwinKernel(
    "k",
    ("T", "A"),
    (TwinParam("x", "T", True), TwinParam("acc", "A", True), TwinParam("n", "int", False)),
)


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_picks_its_instantiation_key_and_expression(dtype: str) -> None:
    ctype = contract.C_SCALAR_OF_DTYPE[dtype]
    instantiation = contract.template_types(KERNEL, [dtype, "float32", None])
    assert instantiation == (ctype, "float")
    assert contract.instantiation_key(instantiation) == f"{ctype}, float"
    assert KERNEL.expression(instantiation) == f"k<{ctype}, float>"
    assert contract.instantiated_ctypes(KERNEL, instantiation) == [ctype, "float", "int"]


def test_an_instantiation_without_a_template_has_the_empty_key() -> None:
    plain = TwinKernel("p", (), (TwinParam("x", "float", True),))
    assert contract.template_types(plain, ["float32"]) is None
    assert contract.instantiation_key(None) == "" and plain.expression(None) == "p"


def test_argument_checks_name_the_parameter() -> None:
    x, n = KERNEL.params[0], KERNEL.params[2]
    with pytest.raises(contract.InputError, match="parameter x is a pointer; pass a tensor, not"):
        contract.check_argument(KERNEL, x, "float", None, "int")
    with pytest.raises(contract.InputError, match=r"parameter x is float\*; got a float64 tensor"):
        contract.check_argument(KERNEL, x, "float", "float64", "Tensor")
    with pytest.raises(contract.InputError, match="parameter n is a int scalar; got a tensor"):
        contract.check_argument(KERNEL, n, "int", "int32", "Tensor")
    contract.check_argument(KERNEL, x, "float", "float32", "Tensor")
    contract.check_argument(KERNEL, n, "int", None, "int")
    error = contract.not_compiled(KERNEL, ("__half", "__half"))
    assert str(error) == (
        "twin kernel k was not compiled with T=__half, A=__half: no case of the op launches "
        "it; add a case with those dtypes"
    )
    error = contract.tensor_error("k", 1, "cpu", (3,), (1,))
    assert str(error) == (
        "kernel k, argument 1: tensor is on cpu, this implementation runs on cuda; "
        "move it with .to('cuda')"
    )


def test_nothing_takes_the_tables_from_a_backend() -> None:
    tables = {"C_SCALAR_OF_DTYPE", "DTYPE_OF_C_SCALAR", "SCALAR_TYPES", "POINTER_ONLY_TYPES"}
    found = [
        f"{path.relative_to(REPO)}:{node.lineno}"
        for folder in ("portkit", "tests", "scripts")
        for path in (REPO / folder).rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom)
        and (node.module or "").startswith("portkit.backends")
        and tables & {a.name for a in node.names}
    ]
    assert found == []


def test_a_plan_is_found_by_the_dtypes_of_the_deciding_tensors() -> None:
    from portkit.runtime.twin_launch import cached_plan

    class Plan:
        count = 3

    class Tensor:
        def __init__(self, dtype: str) -> None:
            self.dtype = dtype

    positions = contract.deciders(KERNEL)
    assert positions == (0, 1)
    plans = {("float16", "float32"): Plan()}
    args = [Tensor("float16"), Tensor("float32"), 4]
    assert cached_plan(plans, positions, args) is plans[("float16", "float32")]
    assert cached_plan(plans, positions, args[:2]) is None  # the count differs
    assert cached_plan(plans, positions, [Tensor("float32")] + args[1:]) is None
    assert cached_plan(plans, positions, [1.0, *args[1:]]) is None  # not a tensor
