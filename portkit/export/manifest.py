"""One op's entry in an exported package's ``manifest.json``: what the runtime needs to
launch its kernels (parameters, lowered names per instantiation, image files) and to
register it (the layout found by running its launchers on meta tensors), plus what a
reader wants to know (registers and static shared memory per architecture)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from portkit.backends.twin.instances import checked_twin_kernels, twin_instantiations
from portkit.build.archs import ArchBuild
from portkit.runtime.launch_contract import instantiation_key
from portkit.torch_op.layout import op_layout


def op_entry(op: Any, class_name: str, builds: Sequence[ArchBuild]) -> dict:
    newest = builds[-1]
    kernels = {}
    twins = checked_twin_kernels(op)
    for name, instantiations in twin_instantiations(op).items():
        kernel = twins[name]
        # Keyed by the instantiation's C types ("float", "__half, float"; "" for none,
        # launch_contract.instantiation_key): the runtime picks one from the tensors by
        # the contract's template_types (backends/twin/instances.py says which are compiled).
        keys = {instantiation_key(i): kernel.expression(i) for i in instantiations}
        kernels[name] = {
            "templates": list(kernel.template_params),
            "params": [asdict(p) for p in kernel.params],
            "lowered": {k: newest.symbols[e] for k, e in keys.items()},
            "resources": {
                b.arch: {k: b.resources.get(b.symbols[e], {}) for k, e in keys.items()}
                for b in builds
            },
        }
    layout = op_layout(op)
    return {
        "class": class_name,
        "dtypes": list(op.definition.dtypes),
        "same_shape": op.definition.same_shape,
        "input_dtypes": list(op.definition.input_dtypes),
        # The class defines check_inputs (backward: the layout's has_backward); the
        # runtime reads what is declared here and probes the class for nothing.
        "check_inputs": op.definition.check_inputs is not None,
        "layout": {
            "input_types": list(layout.input_types),
            "outputs": layout.outputs,
            "saved": [list(s) for s in layout.saved],
            "grads": list(layout.grads),
            "has_backward": layout.has_backward,
        },
        "cubins": {b.arch: f"kernels/{op.name}.{b.arch}.cubin" for b in builds},
        "ptx": f"kernels/{op.name}.{newest.arch}.ptx",
        "ptx_arch": newest.arch,
        "kernels": kernels,
    }
