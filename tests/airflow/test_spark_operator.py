"""JrsSparkSubmitOperator and JrsCleanupOperator through Airflow (dag.test), real spark-submit, real Redis.

"Spark did not run" is proven by counting Spark event logs: one file per launched application.
"""

from __future__ import annotations

import json

import pytest
from dag_runner import DATE, run_dag

from airflow_jrs.store import JobStatus

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

JOB = "jrs_tiny.submit.2013-01-01"


@pytest.fixture
def env(jrs_env, monkeypatch):
    monkeypatch.setenv("JRS_TEST_SPARK_CONF", json.dumps(jrs_env.spark_conf()))
    for name in ("JRS_TEST_APP_ARGS", "JRS_TEST_JOB_VERSION", "JRS_TEST_RETRIES", "JRS_TEST_EXEC_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    return jrs_env


def test_first_run_computes_cleanup_commits_and_second_run_starts_no_spark(env):
    states = run_dag()
    assert states == {"submit": "success", "cleanup": "success"}
    assert env.launches() == 1
    entry = env.store.get_entry(JOB)
    assert entry is not None and entry.is_clean
    result = entry.result
    assert result.status is JobStatus.SUCCEEDED
    assert result.application_id and result.application_id.startswith("local-")
    assert result.metrics == {"rows": 10}
    assert result.attempt is not None and result.attempt.dag_id == "jrs_tiny"
    out = result.outputs["output"]
    assert out.endswith(f"fence-{result.fence}") and (env.output_root / out.split(str(env.output_root))[1].lstrip("/") / "data").exists()
    assert env.store.client.exists(env.store.keys.intent(JOB)) == 0

    states = run_dag()  # a second run of the same date: same job
    assert states == {"submit": "success", "cleanup": "success"}
    assert env.launches() == 1, "Spark ran again for a committed job"
    assert env.store.get_entry(JOB).result == result
