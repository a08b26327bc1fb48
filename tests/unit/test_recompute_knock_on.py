"""What clearing a recomputed job's task instance recomputes besides it.

The clear includes downstream tasks; a cleared guarded task recomputes when it has no successful
result or its arguments carry an output of a recomputed job (a new result lives in a new fence
folder, so its fingerprint changes). :func:`knock_on` is that rule; the CLI's preview applies it
to the task instances Airflow's dry run of the same clear names."""

from __future__ import annotations

from airflow_jrs.domain.recompute import ClearedJob, knock_on, moving_outputs
from airflow_jrs.store import JobResult, JobStatus
from airflow_jrs.store.redis.leases import RedisJobLease

ROOT = "/data/ns"


def result(job_id: str, fence: int, **outputs: str) -> JobResult:
    return JobResult(job_id=job_id, status=JobStatus.SUCCEEDED, fence=fence, outputs=outputs)


INGEST = result("d.ingest.2013-01-01", 7, flights=f"{ROOT}/d.ingest.2013-01-01/fence-7-ab/flights")
ONTIME = result("d.ontime.2013-01-01", 8, ontime=f"{ROOT}/d.ontime.2013-01-01/fence-8-cd/ontime")


def cleared(task_id: str, res: JobResult | None, *args: str, job_id: str | None = None) -> ClearedJob:
    return ClearedJob(task_id, job_id or (res.job_id if res else f"d.{task_id}.2013-01-01"), repr(list(args)), res)


def test_a_job_whose_arguments_carry_a_recomputed_output_recomputes_and_says_whose():
    ontime = cleared("ontime", ONTIME, "--flights", INGEST.outputs["flights"])
    (found,) = knock_on({INGEST.job_id: INGEST}, [ontime])
    assert found.recompute and found.upstream == INGEST.job_id
    assert f"downstream of {INGEST.job_id}" in found.reason and "its arguments carry" in found.reason


def test_the_rule_applies_transitively_and_a_job_without_the_outputs_reuses():
    ontime = cleared("ontime", ONTIME, "--flights", INGEST.outputs["flights"])
    report = cleared("report", result("d.report.2013-01-01", 9), "--in", ONTIME.outputs["ontime"])
    other = cleared("other", result("d.other.2013-01-01", 10), "--date", "2013-01-01")
    found = knock_on({INGEST.job_id: INGEST}, [report, other, ontime])  # in any order
    assert [(k.job.task_id, k.recompute, k.upstream) for k in found] == [
        ("report", True, ONTIME.job_id),
        ("other", False, None),
        ("ontime", True, INGEST.job_id),
    ]
    assert "reuses its result" in found[1].reason


def test_a_cleared_job_without_a_successful_result_runs():
    failed = JobResult(job_id="d.x.2013-01-01", status=JobStatus.FAILED, fence=3)
    found = knock_on({INGEST.job_id: INGEST}, [cleared("x", failed), cleared("y", None)])
    assert [k.recompute for k in found] == [True, True] and "no successful result" in found[0].reason


def test_an_output_outside_the_fence_folder_does_not_move_so_its_readers_reuse():
    fixed = result("d.fixed.2013-01-01", 5, table="/warehouse/flights", staged=f"{ROOT}/x/fence-5/part")
    assert moving_outputs(fixed) == [f"{ROOT}/x/fence-5/part"]
    (found,) = knock_on({fixed.job_id: fixed}, [cleared("reader", ONTIME, "--in", "/warehouse/flights")])
    assert not found.recompute


class _Airflow:
    """Airflow's answers to the recompute's calls: the clear names the recomputed task and a
    mapped guarded task downstream of it (map index 2), whose XCom names its job."""

    has_credentials = True

    def __init__(self) -> None:
        self.cleared = [
            {"task_id": "ingest", "map_index": -1, "rendered_fields": {"job_id": None}},
            {"task_id": "per_airport", "map_index": 2, "rendered_fields": {"job_id": None, "application_args": []}},
        ]

    def clear(self, dag_id: str, run_id: str, task_ids: list, *, dry_run: bool = False) -> list[dict]:
        return self.cleared

    def xcom(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> dict | None:
        return {"job_id": f"d.{task_id}.2013-01-01.map-{map_index}"} if task_id == "per_airport" else None


def test_a_mapped_downstream_task_is_reported_cleared_when_the_clear_cleared_its_map_index(store):
    """The clear answers ``(task_id, map_index)``; a downstream target built without its map
    index (-1) never matched a mapped one, which the recompute then called 'not cleared'."""
    from airflow_jrs.actions.recompute import Target, add_downstream, clear

    store.create_dirty_result(INGEST)
    targets = [Target(INGEST.job_id, store.get_entry(INGEST.job_id), "d", "r1", "ingest")]
    api = _Airflow()
    assert add_downstream(store, api, targets) == []  # type: ignore[arg-type]
    (downstream,) = targets[1:]
    assert (downstream.job_id, downstream.task_id, downstream.map_index) == (
        "d.per_airport.2013-01-01.map-2", "per_airport", 2,
    )  # fmt: skip
    clear(api, targets)  # type: ignore[arg-type]
    assert downstream.cleared, "a mapped downstream task that the clear cleared is reported 'not cleared'"


class _RunGone(_Airflow):
    """The run that wrote the result was deleted (the UI's way to run a date anew)."""

    def clear(self, dag_id: str, run_id: str, task_ids: list, *, dry_run: bool = False) -> list[dict]:
        from airflow_jrs.actions.airflow_api import AirflowApiError

        raise AirflowApiError(f"run {run_id} not found", status=404)


def test_a_preview_whose_run_is_gone_says_so_instead_of_listing_nothing_downstream(store):
    """A job's result names the run that wrote it; when that run was deleted, the clear clears
    nothing there and no downstream job recomputes with it: the preview said nothing at all."""
    from airflow_jrs.actions.recompute import Target, add_downstream

    store.create_dirty_result(INGEST)
    targets = [Target(INGEST.job_id, store.get_entry(INGEST.job_id), "d", "r1", "ingest")]
    notes = add_downstream(store, _RunGone(), targets)  # type: ignore[arg-type]
    assert len(targets) == 1
    assert any("run r1 of d is gone from Airflow" in note and "--from-date" in note for note in notes), notes


PYSPARK_CHAIN = """
from datetime import UTC, datetime
from airflow.sdk import DAG, task
from airflow_jrs.operators import JrsSparkSubmitOperator

with DAG("d", schedule="@daily", start_date=datetime(2013, 1, 1, tzinfo=UTC), catchup=False):
    ingest = JrsSparkSubmitOperator(task_id="ingest", application="/nowhere/a.py", conn_id="spark_local")

    @task.jrs_pyspark(conn_id="spark_local")
    def ontime(flights, spark=None, jrs=None):
        return 1

    ontime(ingest.output)
"""


class _Airflow32(_Airflow):
    """Airflow 3.2's answers: the dry run of the clear carries no rendered fields; the task
    instance's own (from its last try) are asked apart, and may be missing too."""

    def __init__(self, kept: dict | None) -> None:
        self.cleared = [
            {"task_id": "ingest", "map_index": -1, "rendered_fields": {}},
            {"task_id": "ontime", "map_index": -1, "rendered_fields": {}},
        ]
        self.kept = kept

    def rendered_fields(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> dict:
        return dict(self.kept or {}) if task_id == "ontime" else {}

    def xcom(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> dict | None:
        return {"job_id": ONTIME.job_id} if task_id == "ontime" else None


def test_a_decorated_downstream_task_is_found_when_the_dry_run_renders_nothing(store, dag_folder):
    """Issue 41 (previews under-count): on Airflow 3.2 the dry run's ``rendered_fields`` are empty
    and a ``@task.jrs_pyspark`` task had no ``job_id`` among them, so the downstream job that
    recomputed (its input is the upstream's new fenced output) was not listed. Guarded tasks are
    read from the serialized DAG; arguments that cannot be seen make it "may compute"."""
    from airflow_jrs.actions.planning.dags import load_dag
    from airflow_jrs.actions.recompute import Target, add_downstream

    dag = load_dag("d", dag_folder("d.py", PYSPARK_CHAIN))
    lease = RedisJobLease(store.client, store.namespace, INGEST.job_id, ttl=30)
    token = lease.acquire()  # its output folder carries its fence: a recompute moves it
    flights = f"{ROOT}/{INGEST.job_id}/fence-{int(token)}-ab/flights"
    store.create_dirty_result(JobResult(job_id=INGEST.job_id, status=JobStatus.SUCCEEDED, outputs={"flights": flights}),
                              fence=token)  # fmt: skip
    lease.release()
    store.create_dirty_result(ONTIME)

    targets = [Target(INGEST.job_id, store.get_entry(INGEST.job_id), "d", "r1", "ingest")]
    kept = {"op_args": [flights], "op_kwargs": {}}
    add_downstream(store, _Airflow32(kept), targets, dag)  # type: ignore[arg-type]
    assert [(t.job_id, t.downstream) for t in targets[1:]] == [(ONTIME.job_id, True)]
    assert f"downstream of {INGEST.job_id}" in targets[1].note

    targets = [Target(INGEST.job_id, store.get_entry(INGEST.job_id), "d", "r1", "ingest")]
    add_downstream(store, _Airflow32(None), targets, dag)  # type: ignore[arg-type]
    assert [(t.job_id, t.downstream) for t in targets[1:]] == [(ONTIME.job_id, True)]
    assert targets[1].note.startswith("may compute") and "rendered arguments" in targets[1].note
