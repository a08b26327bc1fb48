"""Thousands of trials of the coordination protocol, Jepsen-style, without Spark.

A *trial* is one job (``trial-<n>``) attacked by 2-3 concurrent attempts that follow the
operator's protocol on the real store, lease and intent (:mod:`.attempt`), with a small process in
place of spark-submit (:mod:`.standin`). A seeded plan (:mod:`.faults`) kills, stalls and pauses
them at random times and restarts Redis underneath (:mod:`.runner`); every process appends what
it did to one history log (:mod:`.history`); afterwards :mod:`.checker` reads the log and the
store and reports each broken guarantee, fault counts and takeover times.

    from jrs_testbench.trials import RunConfig, check_run, run_trials
    outcome = run_trials(RunConfig(trials=200, seed=7, workdir=tmp), server)
    report = check_run(outcome.bench.log_path, server.url, outcome.bench.namespace, outcome.bench.spec_root)
"""

from jrs_testbench.trials.checker import JobFacts, Report, Violation, check, check_run, group_history
from jrs_testbench.trials.config import AttemptPlan, Bench, Protocol
from jrs_testbench.trials.faults import Fault, FaultMix, plan_trials
from jrs_testbench.trials.history import HistoryLog, read_history
from jrs_testbench.trials.runner import RunConfig, RunOutcome, run_trials

__all__ = [
    "AttemptPlan",
    "Bench",
    "Fault",
    "FaultMix",
    "HistoryLog",
    "JobFacts",
    "Protocol",
    "Report",
    "RunConfig",
    "RunOutcome",
    "Violation",
    "check",
    "check_run",
    "group_history",
    "plan_trials",
    "read_history",
    "run_trials",
]
