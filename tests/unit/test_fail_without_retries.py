"""What no retry can fix fails the task at once (``AirflowFailException``); an outage stays retryable.

Completes the cases of ``test_store_unavailable.py`` (store refusals, invalid job ids,
quarantined and future-version entries) with configuration errors and the cleanup operator,
against a real Redis; "no Spark" is proven by the absence of a Spark hook and of a lease.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException

from airflow_jrs.exceptions import CorruptJobResultError, JrsConfigError, StoreUnavailableError
from airflow_jrs.operators import JrsCleanupOperator, JrsSparkSubmitOperator
from airflow_jrs.store import RedisJobResultStore
from jrs_testbench.helpers import TINY_APP, free_port, spark_env

DAY = datetime(2013, 1, 1, tzinfo=UTC)
JOB = "d.t.2013-01-01"


def context() -> dict:
    ti = SimpleNamespace(dag_id="d", task_id="t", try_number=1, map_index=-1, xcom_push=lambda **kw: None)
    return {"ti": ti, "run_id": "scheduled__2013-01-01", "data_interval_start": DAY, "logical_date": DAY}


@pytest.fixture
def store(monkeypatch, tmp_path, redis_url):
    for key, value in spark_env("local[1]").items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AIRFLOW__JRS__OUTPUT_ROOT", str(tmp_path / "output"))
    monkeypatch.setenv("AIRFLOW__JRS__SPEC_ROOT", str(tmp_path / "specs"))
    namespace = f"t-{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("AIRFLOW_CONN_JRS_DEFAULT", f"{redis_url}?namespace={namespace}")
    s = RedisJobResultStore(redis_url, namespace)
    yield s
    s.client.close()


def submit(conn_id: str = "spark_local") -> JrsSparkSubmitOperator:
    return JrsSparkSubmitOperator(
        task_id="t", application=TINY_APP, application_args=["--output", "{jrs_output}"], conn_id=conn_id
    )


def test_an_undefined_spark_connection_fails_without_retries_and_leaves_no_lease(store):
    op = submit(conn_id="no_such_spark")
    with pytest.raises(AirflowFailException, match="'no_such_spark' is not defined") as info:
        op.execute(context())
    assert isinstance(info.value.__cause__, JrsConfigError)
    assert op._hook is None and store.client.exists(store.keys.lease(JOB)) == 0


def test_an_undefined_jrs_connection_fails_without_retries(store, monkeypatch):
    monkeypatch.delenv("AIRFLOW_CONN_JRS_DEFAULT")
    op = submit()
    with pytest.raises(AirflowFailException, match="jrs connection 'jrs_default' is not defined"):
        op.execute(context())
    assert op._hook is None


def test_cleanup_of_a_quarantined_entry_fails_without_retries(store):
    store.client.set(store.keys.result(JOB), b"{truncated")
    with pytest.raises(AirflowFailException, match=f"release-quarantine {JOB}") as info:
        JrsCleanupOperator(task_id="cleanup", jobs=[JOB]).execute(context())
    assert isinstance(info.value.__cause__, CorruptJobResultError)


def test_an_outage_stays_retryable_for_the_cleanup_too(store, monkeypatch):
    monkeypatch.setenv(
        "AIRFLOW_CONN_JRS_DEFAULT",
        f"redis://127.0.0.1:{free_port()}/0?namespace={store.namespace}&connect_timeout=0.5&retries=0",
    )
    with pytest.raises(StoreUnavailableError) as info:
        JrsCleanupOperator(task_id="cleanup", jobs=[JOB]).execute(context())
    assert info.value.retryable
