"""JrsCleanupOperator outcomes called directly (no dag.test): what an Asset event may announce,
and which staging a late cleanup must leave alone."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import pytest
from airflow.sdk import Asset
from airflow.sdk.exceptions import AirflowSkipException

from airflow_jrs.lease import JobLease
from airflow_jrs.operators import JrsCleanupOperator
from airflow_jrs.store import JobResult, JobStatus, RedisJobResultStore
from jrs_testbench.helpers import connection_env

DATA = Asset("file:///data/totals")


@pytest.fixture
def store(monkeypatch, redis_url, namespace, tmp_path):
    for key, value in connection_env(redis_url, namespace, data_dir=tmp_path).items():
        monkeypatch.setenv(key, value)
    s = RedisJobResultStore(redis_url, namespace)
    yield s
    s.client.close()


def context() -> dict:
    events: dict = defaultdict(lambda: SimpleNamespace(extra={}))
    return {"ti": SimpleNamespace(try_number=1), "run_id": "r", "outlet_events": events}


def test_committing_only_failed_jobs_emits_no_asset_event(store):
    store.create_dirty_result(JobResult(job_id="j", status=JobStatus.FAILED, error="spark-submit failed"))
    op = JrsCleanupOperator(task_id="cleanup", jobs=["j"], outlets=[DATA])
    ctx = context()
    with pytest.raises(AirflowSkipException, match="none SUCCEEDED"):
        op.execute(ctx)
    assert store.get_entry("j").is_clean  # committed all the same
    assert ctx["outlet_events"] == {}


def test_asset_event_of_a_mixed_commit_names_only_succeeded_jobs(store):
    store.create_dirty_result(JobResult(job_id="ok", status=JobStatus.SUCCEEDED, outputs={"o": "/x"}))
    store.create_dirty_result(JobResult(job_id="bad", status=JobStatus.CANCELED))
    ctx = context()
    JrsCleanupOperator(task_id="cleanup", jobs=["ok", "bad"], outlets=[DATA]).execute(ctx)
    extra = ctx["outlet_events"][DATA].extra
    assert [j["job_id"] for j in extra["jobs"]] == ["ok"]
    assert extra["unsuccessful"] == ["bad"]


def test_late_cleanup_keeps_the_staging_of_the_attempt_holding_the_lease(store, tmp_path, redis_url):
    job_root = tmp_path / "output" / store.namespace / "j"
    for fence in (1, 2, 3):
        (job_root / f"fence-{fence}").mkdir(parents=True)
    store.create_dirty_result(JobResult(job_id="j", status=JobStatus.SUCCEEDED, outputs={"o": "x"}), fence=None)
    store.client.set(store.keys.fence("j"), 2)  # fences 1 and 2 were handed out before
    lease = JobLease(store.client, store.namespace, "j", ttl=30)
    assert lease.acquire() == 3  # an attempt recomputing the job (e.g. after a code change) runs now
    try:
        JrsCleanupOperator(task_id="cleanup", jobs=["j"]).execute(context())
    finally:
        lease.release()
    assert sorted(p.name for p in Path(job_root).iterdir()) == ["fence-3"]
