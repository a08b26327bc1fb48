"""What a committed date costs in XCom calls and Redis round trips, pinned per task.

Runs the flights shape (``tests/airflow/dags/jrs_xcom_dags.py``: two ``jrs_spark_job`` pairs,
ontime's arguments pulling ingest's output) with ``dag.test()`` over jobs committed beforehand,
and counts what the tasks send: XCom requests to the Execution API (each one a round trip to
the API server, about 85 ms on a busy deployment: docs/benchmarks.md) and Redis round trips in
the test's namespace. Nothing is mocked: the counters wrap the real channel and the real
socket. A change that adds a call fails here, whatever the machine's speed.
"""

from __future__ import annotations

import importlib.util
import itertools
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from redis.connection import AbstractConnection

from airflow_jrs.domain.identity import fingerprint
from airflow_jrs.store import JobResult, JobStatus
from jrs_testbench.helpers import TINY_APP

pytestmark = pytest.mark.airflow

DAG_FILE = Path(__file__).parent / "dags" / "jrs_xcom_dags.py"
DATE = datetime(2013, 1, 1, tzinfo=UTC)
HANDSHAKE = (b"CLIENT", b"HELLO", b"AUTH", b"SELECT")
_counter = itertools.count()


def load(dag_id: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"jrs_xcom_dags_{next(_counter)}", DAG_FILE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, dag_id), module


def commit(jrs_env: Any, module: Any, dag_id: str, *, clean: bool) -> None:
    """Both jobs of the date, stored as the DAG will compute their ids and fingerprints."""
    templated = dag_id == "jrs_xcom_templated"
    ingest_out = str(jrs_env.output_root / "ingest-2013-01-01")
    args = {"ingest": list(module.INGEST_ARGS), "ontime": [*module.ONTIME_ARGS[:3], ingest_out]}
    app = Path(TINY_APP).read_bytes()
    for name, app_args in args.items():
        job_id = f"xf.{name}.2013-01-01" if templated else f"{dag_id}.{name}.submit.2013-01-01"
        fp = fingerprint(application_bytes=app, application=TINY_APP, application_args=app_args, job_version=None)
        jrs_env.store.create_dirty_result(
            JobResult(job_id=job_id, status=JobStatus.SUCCEEDED, fingerprint=fp, outputs={"output": ingest_out})
        )
        if clean:
            jrs_env.store.mark_result_as_clean(job_id)


class Traffic:
    """XCom requests and Redis round trips, per task id (from the running task's identity)."""

    def __init__(self, namespace: str) -> None:
        self.xcom: Counter[tuple[str, str]] = Counter()
        self.redis: Counter[str] = Counter()
        self.task = "?"
        self.mine = namespace.encode()

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from airflow.sdk.execution_time import supervisor

        real_send_msg = supervisor.InProcessSupervisorComms.send
        real_run = supervisor.run_task_in_process
        traffic = self

        def run_task_in_process(ti: Any, task: Any, **kwargs: Any) -> Any:  # 3.3 adds client=
            traffic.task = ti.task_id
            try:
                return real_run(ti=ti, task=task, **kwargs)
            finally:
                traffic.task = "?"

        def send(self: Any, msg: Any) -> Any:
            name = type(msg).__name__
            if "XCom" in name:
                traffic.xcom[(traffic.task, name)] += 1
            return real_send_msg(self, msg)

        monkeypatch.setattr(supervisor.InProcessSupervisorComms, "send", send)
        monkeypatch.setattr(supervisor, "run_task_in_process", run_task_in_process)
        real_send = AbstractConnection.send_packed_command

        def counting_send(conn: Any, command: Any, check_health: bool = True) -> Any:
            data = b"".join(command) if isinstance(command, list) else command
            if traffic.mine in data and not any(word in data[:40].upper() for word in HANDSHAKE):
                traffic.redis[traffic.task] += 1
            return real_send(conn, command, check_health)

        monkeypatch.setattr(AbstractConnection, "send_packed_command", counting_send)


def run(jrs_env: Any, monkeypatch: pytest.MonkeyPatch, dag_id: str, *, clean: bool) -> Traffic:
    dag, module = load(dag_id)
    commit(jrs_env, module, dag_id, clean=clean)
    traffic = Traffic(jrs_env.namespace)
    traffic.install(monkeypatch)
    dr = dag.test(logical_date=DATE)
    states = {ti.task_id: str(ti.state) for ti in dr.get_task_instances()}
    assert set(states.values()) == ({"skipped"} if "skip" in dag_id else {"success"}), states
    assert jrs_env.launches() == 0
    print(f"\n{dag_id} clean={clean}: XCom {dict(traffic.xcom)}; Redis {dict(traffic.redis)}")
    return traffic


#: Per skipped submit: its return value and Airflow's extra-link XCom of the job page (written by
#: ``finalize``; the link reads the payload the operator kept, not the XCom). The Spark UI link is
#: declared only where ``[jrs] spark_ui_url`` is set, which this test leaves unset. ontime's one
#: read is its own template (``ti.xcom_pull(task_ids='ingest.submit')``), the DAG's data flow.
SUBMIT_XCOM = {("ingest.submit", "SetXCom"): 2, ("ontime.submit", "SetXCom"): 2}
TEMPLATE_PULL = {("ontime.submit", "GetXComSequenceSlice"): 1}
#: Redis round trips per task: a submit reads the entry once (decide); a cleanup reads it once
#: when clean; a dirty one also reads the live fences and the entry again, then commits.
REDIS = {"clean": {"submit": 1, "cleanup": 1}, "dirty": {"submit": 1, "cleanup": 4}}


@pytest.mark.parametrize("dag_id", ["jrs_xcom_default", "jrs_xcom_templated"])
@pytest.mark.parametrize("clean", [True, False], ids=["clean", "dirty"])
def test_calls_per_committed_date(jrs_env, monkeypatch, dag_id, clean):
    """At first: 15 XCom calls per date (each submit 5: return value, 2 link writes, 2 link
    reads; each cleanup 2: the submit's payload pulled, its own pushed); then 7 (the cleanup
    derives the job ids, reads the store and pushes nothing; the links read no XCom); now 5 (no
    empty Spark UI link without ``[jrs] spark_ui_url``)."""
    traffic = run(jrs_env, monkeypatch, dag_id, clean=clean)
    assert dict(traffic.xcom) == {**SUBMIT_XCOM, **TEMPLATE_PULL}
    assert sum(traffic.xcom.values()) == 5
    expected = REDIS["clean" if clean else "dirty"]
    assert dict(traffic.redis) == {
        f"{name}.{kind}": expected[kind] for name in ("ingest", "ontime") for kind in ("submit", "cleanup")
    }
    entry = jrs_env.store.get_entry(
        "xf.ontime.2013-01-01" if dag_id.endswith("templated") else f"{dag_id}.ontime.submit.2013-01-01"
    )
    assert entry is not None and entry.is_clean


def test_a_submit_that_skips_with_skip_when_done_writes_its_payload_once_and_reads_none(jrs_env, monkeypatch):
    """Before: 7 (the ``jrs_result`` push, 2 link writes, and per link a read of ``return_value``
    (none) then of ``jrs_result``); now 2. Its downstream tasks are skipped: no calls at all."""
    traffic = run(jrs_env, monkeypatch, "jrs_xcom_skip_when_done", clean=True)
    assert dict(traffic.xcom) == {("ingest.submit", "SetXCom"): 2}
    assert dict(traffic.redis) == {"ingest.submit": 1}


def test_the_spark_ui_link_is_declared_only_where_it_can_open(monkeypatch):
    """Airflow writes one XCom per declared link when a task ends, an empty one included: the
    Spark UI link is declared only with ``[jrs] spark_ui_url`` set (read where the DAG is parsed)."""
    from airflow_jrs.operators import JrsSparkSubmitOperator

    def names() -> list[str]:
        op = JrsSparkSubmitOperator(task_id="t", application="app.py")
        return [link.name for link in op.operator_extra_links]

    monkeypatch.delenv("AIRFLOW__JRS__SPARK_UI_URL", raising=False)
    assert names() == ["Job result"]
    monkeypatch.setenv("AIRFLOW__JRS__SPARK_UI_URL", "http://history.example:18080/history/{application_id}/")
    assert names() == ["Job result", "Spark application"]


def test_with_result_documents_a_committed_date_costs_the_same_and_returns_full_results(jrs_env, monkeypatch, tmp_path):
    """``[jrs] result_documents`` on, through Airflow's own task runner: the DAG's cleanups commit
    references (documents first), and a second pass over the date skips on them with the same
    XCom calls and one Redis round trip per task. What a submit returns downstream is the full
    result read from its document: ontime's template pulls ingest's ``outputs`` from it, and
    ontime's fingerprint (its rendered arguments) matches only if they came through."""
    from airflow_jrs.store import RedisJobResultStore
    from airflow_jrs.store.results.documents import FolderDocuments

    folder = tmp_path / "documents"
    folder.mkdir()
    monkeypatch.setenv("AIRFLOW__JRS__RESULT_DOCUMENTS", str(folder))
    dag_id = "jrs_xcom_default"
    dag, module = load(dag_id)
    commit(jrs_env, module, dag_id, clean=False)  # dirty: the DAG's own cleanups commit them
    first = dag.test(logical_date=DATE)
    assert {str(ti.state) for ti in first.get_task_instances()} == {"success"}
    store = RedisJobResultStore(jrs_env.store.client, jrs_env.namespace, result_documents=FolderDocuments(folder))
    for name in ("ingest", "ontime"):
        entry = store.get_entry(f"{dag_id}.{name}.submit.2013-01-01")
        assert entry is not None and entry.is_clean and entry.summary, f"{name}: the cleanup should commit a reference"
        assert store.full_entry(entry).result.outputs == {"output": str(jrs_env.output_root / "ingest-2013-01-01")}

    again_dag, _ = load(dag_id)
    traffic = Traffic(jrs_env.namespace)
    traffic.install(monkeypatch)
    again = again_dag.test(logical_date=DATE)
    assert {str(ti.state) for ti in again.get_task_instances()} == {"success"}
    assert jrs_env.launches() == 0
    assert dict(traffic.xcom) == {**SUBMIT_XCOM, **TEMPLATE_PULL}
    assert dict(traffic.redis) == {f"{n}.{k}": 1 for n in ("ingest", "ontime") for k in ("submit", "cleanup")}


def test_a_failed_try_reads_no_xcom_for_its_links(jrs_env, monkeypatch):
    """A try that failed has no payload in XCom: its links used to read ``return_value`` and then
    ``jrs_result`` anyway (2 reads per link, each a "No XCom value found" warning on Airflow 3.2).
    Here ingest's entry is corrupt, so its task fails before any Spark (the entry is quarantined);
    it now writes its link and reads nothing."""
    dag_id = "jrs_xcom_default"
    dag, _ = load(dag_id)
    jrs_env.store.client.set(f"jrs:{{{jrs_env.namespace}}}:result:{dag_id}.ingest.submit.2013-01-01", b"not json")
    traffic = Traffic(jrs_env.namespace)
    traffic.install(monkeypatch)
    dr = dag.test(logical_date=DATE)
    states = {ti.task_id: str(ti.state) for ti in dr.get_task_instances()}
    assert states["ingest.submit"] == "failed", states
    assert jrs_env.launches() == 0
    assert {name: n for (task, name), n in traffic.xcom.items() if task == "ingest.submit"} == {"SetXCom": 1}
