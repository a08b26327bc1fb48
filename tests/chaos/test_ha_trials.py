"""The fault trials behind real failovers: Sentinel, where every host finds the new primary itself.

The short version of ``benchmarks/fault_trials.py --topology sentinel`` (the long runs and
their figures are in docs/operations/redis.md, "Redis Sentinel"): the trials' real attempts,
supervisor and cleanup against a Sentinel group whose primary is SIGKILLed, SIGSTOPped or asked
to step down every few seconds. With ``durability`` waiting for every replica no invariant may
break, and no failover is excused: its run fault is logged as ``durable_failover``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from jrs_testbench.trials.faults import FaultMix
from jrs_testbench.trials.runner import RunConfig, run_trials

pytestmark = [pytest.mark.chaos, pytest.mark.cluster]


def test_sentinel_failovers_under_guarded_jobs_lose_nothing_when_every_replica_acknowledges(tmp_path: Path) -> None:
    mix = dataclasses.replace(FaultMix(), run_fault_every=(1.5, 3.0))
    outcome = run_trials(RunConfig(trials=50, seed=20261202, workdir=tmp_path, concurrency=3, mix=mix,
                                   topology="sentinel", durability="replicas:2"))  # fmt: skip
    summary = outcome.summary()
    assert outcome.violations == [] and outcome.excused == [], summary
    assert len(outcome.reports) == 50, summary
    # Real failovers happened meanwhile: how many depends on the machine's load (a quiet one makes
    # about one per 6 trials, the gate's load once made 4 in 40), so only "several" is asked.
    assert summary["unavailable_s"]["samples"] >= 2, summary
    assert summary["outcomes"].get("SUCCEEDED/clean", 0) > 10, summary
