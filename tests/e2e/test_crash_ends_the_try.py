"""A crash says what happened: ``kill -9`` of a real Airflow task while its real spark-submit runs.

Airflow's task supervisor ends a try only once every channel of the task process (its stdin
requests socket, stdout, stderr, the log socket) is closed. Our supervisor beside spark-submit
outlives the task on purpose (the retry waits for its application and adopts the output); it
once inherited the task's stdin, so Airflow kept the dead try "running" until the orphaned
application ended or ``socket_cleanup_timeout`` (60 s) ran out, and logged "Process exited with
open sockets". Here the application waits for a gate file, so it provably still runs while the
test checks, through ``/proc``, that nothing it left holds a channel of the dead task, and that
Airflow ended the try. Then the gate opens: the retry adopts the orphan's output, its log names
the adopted application, and ``show``, its JSON and the page's API list the recovery.

DAG: ``tests/e2e/dags/jrs_e2e_crash.py``. About 60-90 s (one Spark application, one retry).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import quote

import psutil
import pytest

from airflow_jrs.settings import settings_for
from airflow_jrs.store.redis.namespace import RedisJobNamespace
from jrs_testbench.helpers import wait_until

pytestmark = [pytest.mark.airflow, pytest.mark.e2e, pytest.mark.spark, pytest.mark.xdist_group("deployment")]

DAG_ID = "jrs_e2e_crash"
CLI = str(Path(sys.executable).parent / "airflow-jrs")


def _links(pid: int) -> dict[str, str]:
    """fd -> what it points to (``socket:[inode]``, ``pipe:[inode]``, a path), read from /proc."""
    found = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            found[fd] = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # closed meanwhile
            pass
    return found


def _task_log(e2e, run_id: str, attempt: int) -> str:
    logs = list(
        (e2e.airflow.home / "logs").glob(f"dag_id={DAG_ID}/run_id={run_id}/task_id=submit/attempt={attempt}.log")
    )
    return logs[0].read_text(errors="replace") if logs else ""


def _try_of(e2e, run_id: str) -> dict:
    return next(ti for ti in e2e.client.task_instances(DAG_ID, run_id) if ti["task_id"] == "submit")


def test_a_sigkilled_task_ends_its_try_at_once_and_its_retry_adopts_and_says_so(e2e, tmp_path):
    e2e.airflow.wait_for_dag(DAG_ID)
    e2e.client.unpause(DAG_ID)
    job_id = f"{DAG_ID}.submit.{uuid.uuid4().hex[:8]}"
    gate = tmp_path / "gate"
    launched = e2e.launches()
    run_id = e2e.client.trigger(DAG_ID, "2013-02-01", conf={"job_id": job_id, "gate": str(gate)})["dag_run_id"]
    jobs = RedisJobNamespace.from_url(e2e.redis_url, settings_for(e2e.namespace, output_root="", spec_root=""))
    try:
        beat = wait_until(
            lambda: (b := jobs.heartbeats.get(job_id)) is not None and b.running and b.child and b,
            "spark-submit running under its supervisor",
            timeout=300,
        )
        # the live task's log shows what spark-submit prints (relayed through the supervisor)
        wait_until(lambda: "gated_app: application" in _task_log(e2e, run_id, 1), "the app's line in the task log")
        supervisor = psutil.Process(beat.pid)
        task = supervisor.parent()
        assert task is not None and task.pid == jobs.intents.get(job_id).pid, "the supervisor's parent is the task"
        channels = {link for link in _links(task.pid).values() if link.startswith("socket:")}
        assert _links(task.pid)["0"] in channels, "the task's stdin is Airflow's requests socket"
        left = [supervisor, *supervisor.children(recursive=True)]  # supervisor, spark-submit, the app's Python

        task.kill()
        wait_until(lambda: not psutil.pid_exists(task.pid) or task.status() == psutil.STATUS_ZOMBIE, "the task gone")

        # (a) what the dead try left running holds no channel of it, and Airflow ends the try at once
        held = {p.pid: sorted(set(_links(p.pid).values()) & channels) for p in left if p.is_running()}
        assert supervisor.is_running() and all(not links for links in held.values()), held
        ended = wait_until(
            lambda: (ti := _try_of(e2e, run_id))["try_number"] >= 2 or ti["state"] != "running",
            "Airflow to end the killed try",
            timeout=300,
        )
        assert not gate.exists() and supervisor.is_running(), "the try ended only after its application"
        assert jobs.heartbeats.get(job_id).running, f"the orphan still runs when the try ended: {ended}"
        scheduler_log = (e2e.airflow.log_dir / "scheduler.log").read_text(errors="replace").splitlines()
        stuck = [line for line in scheduler_log if "open sockets" in line and str(task.pid) in line]
        assert not stuck, stuck  # Airflow's "Process exited with open sockets; cleaning up after timeout"

        gate.touch()  # the orphaned application finishes; the retry adopts its output
        e2e.run(DAG_ID, run_id)
        entry = e2e.store.get_entry(job_id)
        assert entry is not None and entry.result.application_id and entry.result.application_id.startswith("local-")
        assert e2e.launches() - launched == 1, "the retry adopted, it did not run Spark again"

        # (b) the retry's log names the adopted application
        retry_log = _task_log(e2e, run_id, 2)
        assert f"application {entry.result.application_id}) without re-running" in retry_log, retry_log[-3000:]
        assert "application None" not in retry_log

        # (c) show, its JSON and the job page's API list the recovery, with times
        base = [CLI, "--redis-url", e2e.redis_url, "--namespace", e2e.namespace]
        wide = {**os.environ, "COLUMNS": "400"}  # one table row per line, however long its text
        shown = subprocess.run([*base, "show", job_id], capture_output=True, text=True, timeout=120, env=wide).stdout
        assert "Recoveries" in shown and "adopted the finished output of try 1" in shown, shown
        doc = json.loads(
            subprocess.run([*base, "show", "--json", job_id], capture_output=True, text=True, timeout=120).stdout
        )
        api = e2e.client.request("GET", f"/jrs/api/results/{quote(job_id, safe='')}")
        for steps in (doc["recoveries"], api["recoveries"]):
            # newest first: the adoption, after it found the dead try; between them a wait when the
            # orphan still ran, and a take-over when the dead try's lease had not expired yet
            events = [s["event"] for s in steps]
            assert events[0] == "adopted" and "found" in events, steps
            assert set(events[: events.index("found")]) <= {"adopted", "waited", "took_over"}, steps
            adopted, found = steps[0], steps[events.index("found")]
            assert found["facts"]["try_number"] == 1 and found["facts"]["pid"] == task.pid, found
            assert adopted["facts"]["application_id"] == entry.result.application_id and adopted["at"], adopted
            assert adopted["fence"] == entry.result.fence and adopted["predecessor"] == found["predecessor"]
    finally:
        gate.touch()
        jobs.close()
        # a failure above must not leave the run going: its retry would start Spark during the
        # next test of this deployment and fail its count of launches too
        with contextlib.suppress(Exception):
            e2e.client.wait_for_run(DAG_ID, run_id, timeout=300)
