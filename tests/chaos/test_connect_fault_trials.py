"""The fault trials with the product's Spark Connect launcher.

Each try runs ``JobAttempt`` with :class:`airflow_jrs.launch.connect_launcher.ConnectLauncher`
against the real Spark Connect server of the ``connect_server`` fixture (one for every trial);
the application is a Spark Connect query whose UDF takes the job's lock file on the server, so
two applications of one job computing at once are seen where they compute
(:mod:`jrs_testbench.trials.connect_launcher`). The faults that need spark-submit's supervisor
and application process are not drawn; the rest of the mix applies. Half the trials run with
``[jrs] result_documents`` on (the compact clean entry).
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
from collections import Counter
from pathlib import Path

import pytest

from jrs_testbench.spark_connect import SparkConnectServer
from jrs_testbench.trials.connect_launcher import SKIPPED_FAULTS, row_udf
from jrs_testbench.trials.faults import FaultMix
from jrs_testbench.trials.runner import RunConfig, run_trials

pytestmark = [pytest.mark.chaos, pytest.mark.spark]

SEED = 20261124
#: a handful: each Connect try is an interpreter and a query on a shared local[2] server (~1.5 min in all)
TRIALS = 6


def test_connect_trials_keep_every_invariant(tmp_path: Path, connect_server: SparkConnectServer) -> None:
    # run faults 3x sparser than the default mix: a Connect try lasts ~5x a stand-in's (an interpreter,
    # a session, a query), and with a Redis fault in nearly every try a handful of trials never succeeds
    mix = dataclasses.replace(FaultMix(), run_fault_every=(12.0, 30.0))
    drawn: Counter[str] = Counter()
    clean = 0
    for documents, first in ((False, 0), (True, TRIALS // 2)):  # the same seed's next trials with documents on
        outcome = run_trials(RunConfig(trials=TRIALS // 2, seed=SEED, workdir=tmp_path / str(documents),
                                       concurrency=3, mix=mix, launcher="connect", connect_server=connect_server,
                                       first_trial=first, result_documents=documents))  # fmt: skip
        summary = {"result_documents": documents, **outcome.summary()}
        assert outcome.violations == [], summary
        assert len(outcome.reports) == TRIALS // 2
        assert summary["status"] == {"done": TRIALS // 2}, summary  # no operation of a job outlived its trial
        drawn += outcome.fault_mix()
        clean += summary["outcomes"].get("SUCCEEDED/clean", 0)
    assert [f for f in SKIPPED_FAULTS if drawn[f]] == [], drawn
    assert sum(drawn[f] for f in ("kill_task", "on_kill", "pause", "zombie") if f in drawn) > 0, drawn
    assert clean > 0, drawn


def test_the_query_reports_another_application_computing(tmp_path: Path) -> None:
    """The detector itself: while another process of the job holds the lock, a row fails and
    logs ``overlap`` (what the checker reports as ``two_applications``)."""
    history, lock = tmp_path / "h.jsonl", tmp_path / "job.lock"
    compute = row_udf(str(history), str(lock), 1, "job-1", 7, rows=2, pace=(0.0, 0.0), fail_at=-1, seed=0)
    assert compute(0) == 0  # alone: computes
    held = os.open(lock, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(RuntimeError, match="another application"):
            compute(1)
    finally:
        os.close(held)
    events = [json.loads(line)["event"] for line in history.read_text().splitlines()]
    assert events == ["work_start", "overlap"]
