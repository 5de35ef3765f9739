"""Prototype against twin on the same device: one algorithm in two languages, so its
outputs and gradients meet the dtype table's tighter twin column (and the summation-order
bound where float atomics summed), never the measured control."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from portkit.checking.configurations import base_name, configuration_of
from portkit.results import Outcome, ValueMismatch, comparison_check


def cross_compare(runner: Any, runs: Sequence[Any]) -> None:
    """One ``vs <twin>`` row per prototype and twin that ran on one device. ``runner`` is
    the case's ``CaseRunner`` and ``runs`` its ``ImplementationRun``s (case_runner.py,
    which calls this: typed loosely so that the two modules do not import each other)."""
    twins = [r for r in runs if r.backend.role == "twin"]
    prototypes = [r for r in runs if r.backend.role == "prototype"]
    for twin in twins:
        for proto in prototypes:
            if proto.backend.device != twin.backend.device or not proto.outputs:
                continue
            if not twin.outputs:
                continue
            t0 = time.perf_counter()
            counted = runner.contributions(proto.backend)
            sides = (proto.backend.name, twin.backend.name)
            notes: list[str] = []
            margins: list[float] = []
            differ: list[ValueMismatch] = []
            problems = runner.compare_all(
                "output", proto.outputs, twin.outputs, sides, counted, notes, margins, differ
            )
            if proto.grads and twin.grads:
                problems += runner.compare_all(
                    "grad", proto.grads, twin.grads, sides, counted, notes, margins, differ
                )
            twin_name = base_name(twin.backend)  # both ran one configuration
            runner.record(
                proto.backend,
                comparison_check(twin_name, configuration_of(twin.backend)),
                Outcome.FAIL if problems else Outcome.PASS,
                "\n".join(problems or notes),
                t0,
                margin=max(margins, default=None),
                compared_with=twin_name,
                mismatches=differ,
            )
