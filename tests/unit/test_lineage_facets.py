"""What a guarded task tells OpenLineage, from its payload (airflow_jrs/observability/lineage.py).

The whole path (the provider's listener, its client, events on disk, Spark's conf) runs in
tests/airflow/test_lineage.py; here the rules each event follows, cheaply.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from airflow_jrs.domain.payload import result_payload
from airflow_jrs.observability.lineage import FACET_NAME, dataset_identity, operator_lineage, spark_lineage_conf
from airflow_jrs.operators import JrsSparkSubmitOperator
from airflow_jrs.operators.guarded import remember_payload
from airflow_jrs.store import Attempt, EntryState, JobResult, JobStatus


@pytest.mark.parametrize(
    ("location", "identity"),
    [
        ("/data/out/fence-3-ab", ("file", "/data/out/fence-3-ab")),
        ("file:///data/out", ("file", "/data/out")),
        ("s3://bucket/jobs/d.t/fence-3-ab/daily", ("s3://bucket", "jobs/d.t/fence-3-ab/daily")),
        ("s3a://bucket/x", ("s3a://bucket", "x")),
        ("gs://b/k", ("gs://b", "k")),
        ("hdfs://nn:8020/warehouse/t", ("hdfs://nn:8020", "/warehouse/t")),
        ("abfss://c@acct.dfs.core.windows.net/p/q", ("abfss://c@acct.dfs.core.windows.net", "p/q")),
    ],
)
def test_output_locations_are_named_as_openlineage_names_datasets(location, identity):
    assert dataset_identity(location) == identity


def payload(**extra):
    result = JobResult(
        job_id="d.t.2013-01-01", status=JobStatus.SUCCEEDED, application_id="local-1",
        outputs={"output": "/o/fence-3-ab", "daily": "/o/fence-3-ab/daily", "same": "/o/fence-3-ab"},
        fingerprint="f" * 8, fence=3,
        attempt=Attempt(dag_id="d", task_id="t", run_id="scheduled__2013-01-01", try_number=2, map_index=-1),
    )  # fmt: skip
    return result_payload(result, EntryState.CLEAN, **extra)


def test_a_reused_job_names_its_outputs_and_the_run_try_and_fence_that_computed_them():
    lineage = operator_lineage(payload(skipped=True))
    assert sorted(d.name for d in lineage.outputs) == ["/o/fence-3-ab", "/o/fence-3-ab/daily"]  # one dataset a folder
    facet = lineage.run_facets[FACET_NAME]
    assert facet.reused is True and facet.fence == 3 and facet.jobId == "d.t.2013-01-01"
    # (an unmapped task's map index, -1, is left out as the payload leaves it out)
    assert facet.computedBy == {"dagId": "d", "taskId": "t", "runId": "scheduled__2013-01-01", "tryNumber": 2}
    assert facet._schemaURL.endswith("OpenLineage.json#/$defs/RunFacet") and facet._producer


def test_a_computed_job_says_so_and_a_failed_try_publishes_nothing():
    assert operator_lineage(payload(skipped=False)).run_facets[FACET_NAME].reused is False
    assert operator_lineage({}).outputs == [] and operator_lineage({}).run_facets == {}
    assert operator_lineage(None).outputs == []


def test_the_operator_answers_the_listener_only_for_the_try_that_kept_the_payload():
    op = JrsSparkSubmitOperator(task_id="t", application="/app.py", conn_id="spark_local")
    ti = SimpleNamespace(dag_id="d", task_id="t", run_id="r", map_index=-1, try_number=1)
    remember_payload(op, {"ti": ti}, payload(skipped=True))
    assert len(op.get_openlineage_facets_on_complete(ti).outputs) == 2
    retry = SimpleNamespace(**{**vars(ti), "try_number": 2})
    assert op.get_openlineage_facets_on_complete(retry).outputs == []  # another try: not this payload
    assert op.get_openlineage_facets_on_failure(ti).outputs == []


def test_spark_gets_no_openlineage_conf_unless_asked_and_a_broken_injection_fails_no_job(monkeypatch, caplog):
    conf = {"spark.executor.memory": "1g"}
    assert spark_lineage_conf(conf, {}) == conf  # [openlineage] spark_inject_* are off by default
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__SPARK_INJECT_PARENT_JOB_INFO", "true")
    # a context without a task instance: the provider's injection raises; the job runs without it
    assert spark_lineage_conf(conf, {}) == conf
    assert "could not add the spark.openlineage.* conf" in caplog.text
