"""Time chosen knob configurations of one op at one bench case, forward and backward
apart, interleaved in one run (portkit tune's runner, without the search). Each spec
overrides the configuration tuning/OP.json holds for this GPU and case (the defaults where
it holds none); '' is that configuration as it is.

    python knob_probe.py OP CASE 'k=v,k=v' 'k=v,...' ...
"""

import json
import sys

import torch

from portkit.backends import create
from portkit.bench.cases import Wanted, bench_cases
from portkit.bench.runner import Bench
from portkit.bench.timing import CudaClock
from portkit.checking.configurations import PinnedBackend
from portkit.cli.context import load_project
from portkit.project.tuning_table import knob_choice
from portkit.runtime.knob_choice import describe

op_name, case_name, *specs = sys.argv[1:]
session = load_project()
op = session.catalog.get(op_name)
twin = create("twin", session.config)
(case,) = bench_cases(op, wanted=Wanted(names=[case_name]))
declared = dict(op.definition.knobs)
choice = knob_choice(op, session.config)
backends = []
gpus = json.load(open(f"tuning/{op_name}.json"))["gpus"]
table = gpus.get(torch.cuda.get_device_name(), {})
base = table.get(case_name, {}).get("config") or {n: v[0] for n, v in declared.items()}
for spec in specs:
    config = dict(base)
    for part in filter(None, spec.split(",")):
        name, value = part.split("=")
        config[name] = type(declared[name][0])(value)
    label = describe(config)
    backends.append(PinnedBackend(twin, choice.pinned(config, label), label))
rows = Bench(CudaClock(), reps=30, warmup=3).run_case(op, case, backends)
for row in rows:
    t = "-" if row.time is None else f"{row.time.median:8.1f}"
    status = row.status.value
    print(f"{op_name} {case_name} {row.direction:4} {t} us  {status:5} {row.implementation}")
