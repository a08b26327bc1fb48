"""Airflow's executor safeguard and the provider's per-launch copy: no false alarm, and
``allow_nested_operators=False`` works.

Every launch runs the Spark provider's own ``SparkSubmitOperator.execute`` on a copy of the task's
operator (:func:`airflow_jrs.launch.provider_adapter.run_submit`). Airflow marks only the task's
operator as the one its Task Runner executes, so without the adapter saying that the copy runs on
the task's behalf, every launch logged "JrsSparkSubmitOperator.execute cannot be called outside of
the Task Runner!", and with ``allow_nested_operators=False`` (a standard operator argument) every
launch failed before spark-submit started.

Real operator through ``dag.test()``, real redis-server, the real Spark provider; spark-submit is
the stand-in (:mod:`jrs_testbench.fake_spark`: one line per launch, output and commit marker
written), so this runs on every supported Airflow minor (``scripts/older_airflow``).
"""

from __future__ import annotations

import importlib.util
import itertools
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from airflow_jrs.store import JobStatus
from jrs_testbench.fake_spark import install_fake_spark_submit, launches

pytestmark = pytest.mark.airflow

DAG_FILE = Path(__file__).parent / "dags" / "jrs_safeguard_dags.py"
DAY = datetime(2013, 1, 1, tzinfo=UTC)
JOB = "jrs_safeguard.submit.2013-01-01"
FALSE_ALARM = "cannot be called outside of the Task Runner"
_counter = itertools.count()


def run_dag() -> dict[str, str | None]:
    """dag.test() one run of the DAG, parsed again (the environment shapes it)."""
    spec = importlib.util.spec_from_file_location(f"jrs_safeguard_dags_{next(_counter)}", DAG_FILE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    run = module.dag.test(logical_date=DAY)
    return {ti.task_id: (str(ti.state) if ti.state else None) for ti in run.get_task_instances()}


@pytest.fixture
def spark_submit(jrs_env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The stand-in spark-submit first on PATH; the file it appends one line per launch to."""
    bin_dir, calls = install_fake_spark_submit(tmp_path, write_output=True)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return calls


@pytest.mark.parametrize("allow_nested", [True, False], ids=["nested-allowed", "nested-refused"])
def test_a_guarded_launch_raises_no_false_alarm_and_needs_no_nested_operators(
    jrs_env, spark_submit, monkeypatch, capfd, caplog, allow_nested
):
    monkeypatch.setenv("JRS_TEST_ALLOW_NESTED", "1" if allow_nested else "0")
    states = run_dag()
    out, err = capfd.readouterr()
    log = "\n".join([out, err, caplog.text])
    assert FALSE_ALARM not in log, [line for line in log.splitlines() if FALSE_ALARM in line]
    assert states == {"submit": "success"}, log[-3000:]
    assert launches(spark_submit) == 1
    entry = jrs_env.store.get_entry(JOB)
    assert entry is not None and entry.result.status is JobStatus.SUCCEEDED
