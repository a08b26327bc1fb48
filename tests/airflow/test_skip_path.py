"""The skip path: a committed job costs at most two Redis round trips and starts no JVM."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from redis.connection import AbstractConnection

from airflow_jrs.domain.identity import fingerprint
from airflow_jrs.operators import JrsSparkSubmitOperator
from airflow_jrs.store import JobResult, JobStatus

pytestmark = pytest.mark.airflow

DAY = datetime(2013, 1, 1, tzinfo=UTC)
HANDSHAKE = (b"CLIENT", b"HELLO", b"AUTH", b"SELECT")


def context():
    ti = SimpleNamespace(dag_id="d", task_id="t", try_number=1, map_index=-1, xcom_push=lambda **kw: None)
    return {"ti": ti, "run_id": "backfill__2013-01-01", "data_interval_start": DAY, "logical_date": DAY}


@pytest.mark.parametrize("clean", [True, False])
def test_committed_job_costs_at_most_two_round_trips_and_no_spark(jrs_env, monkeypatch, tmp_path, clean):
    app = tmp_path / "app.py"
    app.write_text("raise SystemExit('Spark must not run')\n")
    args = ["--output", "{jrs_output}"]
    fp = fingerprint(application_bytes=app.read_bytes(), application=str(app), application_args=args, job_version=None)
    jrs_env.store.create_dirty_result(JobResult(job_id="d.t.2013-01-01", status=JobStatus.SUCCEEDED, fingerprint=fp))
    if clean:
        jrs_env.store.mark_result_as_clean("d.t.2013-01-01")

    sent: list[bytes] = []
    real_send = AbstractConnection.send_packed_command
    # This thread's commands, and any thread's in this test's namespace (the operator's own
    # background work counts); a renewer leaked by another test talks about another namespace.
    me, mine = threading.get_ident(), jrs_env.namespace.encode()

    def counting_send(self, command, check_health=True):
        data = b"".join(command) if isinstance(command, list) else command
        ours = threading.get_ident() == me or mine in data
        if ours and not any(word in data[:40].upper() for word in HANDSHAKE):
            sent.append(data)
        return real_send(self, command, check_health)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", counting_send)
    op = JrsSparkSubmitOperator(
        task_id="t", application=str(app), application_args=args, conn_id="spark_local", conf=jrs_env.spark_conf()
    )
    result = op.execute(context())
    assert result["skipped"] is True and result["state"] == ("clean" if clean else "dirty")
    assert 1 <= len(sent) <= 2, sent
    assert op._hook is None, "a SparkSubmitHook was built"
    assert jrs_env.launches() == 0
