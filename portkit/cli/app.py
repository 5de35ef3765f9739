"""The ``portkit`` command group. Each command lives in its own module of this package;
heavy libraries (torch, numba, cuda.core) are imported inside commands, never at module
import, so ``portkit --help`` is instant."""

from __future__ import annotations

import click

from portkit import __version__
from portkit.cli.bench import bench
from portkit.cli.check import check
from portkit.cli.compile import compile_command
from portkit.cli.diff import diff_command
from portkit.cli.export import export_command
from portkit.cli.lint import lint
from portkit.cli.list import list_ops
from portkit.cli.mutate import mutate
from portkit.cli.port import port_command
from portkit.cli.sim import sim
from portkit.cli.tune import tune
from portkit.cli.watch import watch_command


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(version=__version__, prog_name="portkit")  # works uninstalled too
def main() -> None:
    """portkit: one op, three implementations, one check.

    An op is two files joined by name: prototypes/OP.py (numba.cuda.jit kernels,
    host launchers, the PyTorch reference, the cases) and cuda_src/OP.cu (the C CUDA
    twin, same kernel names). A project can move those folders with
    [tool.portkit] prototypes = "..." / cuda-src = "..." in its pyproject.toml.

    \b
    The loop:
      portkit list              what ops exist and what can run here
      portkit sim sigmoid       run the prototype in the CUDA simulator, on a CPU
      portkit sim sigmoid --block 1 --thread 5    ... and stop there in pdb
      portkit watch sigmoid     re-run its checks on every save (--sim: simulator only)
      portkit check --all       equivalence + gradcheck on every backend this machine has
      portkit check vector_add --sanitize memcheck   ... under compute-sanitizer (GPU)
      portkit diff softmax      where prototype and twin part ways, down to the thread
      portkit compile           do prototypes and twins compile for sm_90? (no GPU needed)
      portkit lint              ... and float64 in float32 kernels, resources side by side
      portkit bench --all       torch, prototype and twin timed side by side (GPU)
      portkit tune rmsnorm      pick its launch configuration for this GPU (tuning/OP.json)
      pytest prototypes         the same suite as generated pytest tests
      portkit export sigmoid --out build/k   the twins as a package without portkit
      portkit mutate sigmoid    do the cases catch mutants of the twin and prototype?
    """


for _command in (list_ops, sim, check, compile_command, lint, diff_command, bench, export_command):
    main.add_command(_command)
main.add_command(port_command)
main.add_command(watch_command)
main.add_command(mutate)
main.add_command(tune)


if __name__ == "__main__":  # pragma: no cover
    main()
