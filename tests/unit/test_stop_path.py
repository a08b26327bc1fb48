"""One stop path: every stop and cancel goes to the job's control hash; the supervisor relays it.

Real processes against a real Redis: a "task" process takes the lease, records the intent and
starts the real supervisor (``python -m airflow_jrs.launch.supervisor``) in front of a stand-in for
spark-submit; the stand-in of a stream's driver honours the driver's control file exactly as
:mod:`airflow_jrs.spark.streaming` does (a stop ends at a batch boundary and says so in
``ended-fence-N.json``; a cancel exits at once). The task is then SIGKILLed where the scenario
needs an orphan. Requests are made through the product's own entry points: the CLI
(``airflow-jrs stop|cancel``) and recovery's ``predecessor="stop"``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest
import redis

from airflow_jrs.cli import main
from airflow_jrs.domain.paths import checkpoint_path, control_path, staging_path, stream_output_path
from airflow_jrs.launch.supervisor import SUPERVISOR_ENV
from airflow_jrs.spark.control import CANCEL, STOP, STOPPED, outcome_path, read_outcome
from airflow_jrs.store import Attempt, JobResult, JobStatus, RedisJobResultStore
from airflow_jrs.store.leases.fence import Fence
from airflow_jrs.store.redis.heartbeats import RedisHeartbeats
from airflow_jrs.store.redis.intents import RedisIntentStore
from airflow_jrs.store.redis.leases import RedisJobLease
from airflow_jrs.store.redis.namespace import RedisJobNamespace
from airflow_jrs.store.redis.stop_requests import RedisStopRequests

JOB = "d.stream.2013-01-01"
ROOT = Path(__file__).parents[2]

#: A stream's driver as the control file sees it: batches until a request for its fence says stop
#: (it writes its outcome and exits 0) or cancel (exit 143 at once). "stuck" ignores both.
DRIVER = """
import json, os, pathlib, sys, time
from airflow_jrs.spark.control import outcome_path, requested_kind
from airflow_jrs.store.leases.fence import Fence
# the fence as the real driver knows it: spark.jrs.fence and spark.jrs.fence_nonce
control, fence, mode, checkpoint = sys.argv[1], Fence.parse(sys.argv[2]), sys.argv[3], sys.argv[5]
out = pathlib.Path(sys.argv[4])
out.mkdir(parents=True, exist_ok=True)
(out / "started").write_text(str(os.getpid()))
batch = 0
while True:
    kind = requested_kind(control, fence) if mode != "stuck" else None
    if kind == "cancel":
        sys.exit(143)
    if kind == "stop":
        doc = {"v": 1, "ended": "stopped", "fence": int(fence), "last_batch_id": batch, "boundary": True,
               "checkpoint_location": checkpoint, "application_id": "local-1"}
        pathlib.Path(outcome_path(control, fence)).write_text(json.dumps(doc))
        (out / "stopped-at-boundary").write_text(str(batch))
        sys.exit(0)
    batch += 1
    time.sleep(0.1)
"""

#: A batch job's spark-submit: on SIGTERM it says so, takes a moment to shut down, and exits 143.
BATCH = """
import os, pathlib, signal, sys, time
out = pathlib.Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
def term(*_):
    (out / "terminated").write_text("SIGTERM")
    time.sleep(0.3)
    sys.exit(143)
signal.signal(signal.SIGTERM, term)
(out / "started").write_text(str(os.getpid()))
while True:
    time.sleep(0.1)
"""

#: The task: takes the lease, records the intent, starts the supervised command, says its fence.
TASK = """
import json, os, socket, subprocess, sys, time
import redis
from airflow_jrs.store.intents import Intent
from airflow_jrs.store.redis.intents import RedisIntentStore
from airflow_jrs.store.redis.leases import RedisJobLease
from airflow_jrs.launch.supervisor import supervised_command
url, ns, job, staging, specs, stop_timeout, log = sys.argv[1:8]
command = json.loads(sys.argv[8])
client = redis.Redis.from_url(url)
fence = RedisJobLease(client, ns, job, ttl=30).acquire()
intents = RedisIntentStore(client, ns, specs)
intent = Intent(job_id=job, fence=fence, spec_uri=intents.spec_uri(job, fence), staging=staging, app_name="a",
                host=socket.gethostname(), pid=os.getpid(), started_at=time.time(), fingerprint="fp",
                application_id=os.environ.get("TEST_APPLICATION_ID"))
attempt = {"dag_id": "d", "task_id": "stream", "run_id": "r", "try_number": 1}
intents.record(intent, {"application": "app.py", "attempt": attempt})
command = [c.replace("{fence}", fence.identity) for c in command]
cmd = supervised_command(command, namespace=ns, job_id=job, fence=fence, ttl=10, stop_timeout=float(stop_timeout))
sup = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(log, "ab"))
print(json.dumps({"fence": int(fence), "identity": fence.identity, "supervisor": sup.pid}), flush=True)
time.sleep(600)
"""


def wait_until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


class Task:
    """A real task process whose supervised spark-submit stand-in runs; ``kill`` orphans them."""

    def __init__(self, redis_url: str, namespace: str, tmp_path: Path, *, stream: bool, mode: str = "",
                 stop_timeout: float = 3600.0, batch: str = BATCH,
                 application_id: str | None = None) -> None:  # fmt: skip
        out_root = str(tmp_path / "out")
        self.out = tmp_path / "child"
        self.log = tmp_path / "supervisor.log"
        self.control = control_path(out_root, namespace, JOB)
        self.checkpoint = checkpoint_path(out_root, namespace, JOB)
        if stream:
            staging = stream_output_path(out_root, namespace, JOB)
            child = [sys.executable, "-c", DRIVER, self.control, "{fence}", mode, str(self.out), self.checkpoint]
        else:
            staging = staging_path(out_root, namespace, JOB, 1)
            child = [sys.executable, "-c", batch, str(self.out), staging, JOB, "{fence}"]
        self.staging = staging
        client = redis.Redis.from_url(redis_url)
        kw = client.connection_pool.connection_kwargs
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            SUPERVISOR_ENV: json.dumps({"host": kw["host"], "port": kw["port"], "db": kw.get("db", 0)}),
            **({"TEST_APPLICATION_ID": application_id} if application_id else {}),
        }
        args = [redis_url, namespace, JOB, staging, str(tmp_path / "specs"), str(stop_timeout), str(self.log)]
        self.process = subprocess.Popen(
            [sys.executable, "-c", TASK, *args, json.dumps(child)], env=env, stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        said = json.loads(self.process.stdout.readline())
        self.fence, self.supervisor = said["fence"], psutil.Process(said["supervisor"])
        self.identity = Fence.parse(said["identity"])  # names the control files (spark/control.py)
        wait_until(lambda: (self.out / "started").exists(), 60, "spark-submit's stand-in to start")
        self.child = psutil.Process(int((self.out / "started").read_text()))

    def kill(self) -> None:
        """kill -9 of the task: its supervisor and spark-submit run on, orphaned."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        wait_until(lambda: self.supervisor.ppid() != self.process.pid, 30, "the supervisor to be orphaned")

    def ended(self) -> bool:
        return not self.supervisor.is_running() or self.supervisor.status() == psutil.STATUS_ZOMBIE

    def cleanup(self) -> None:
        for proc in (self.child, self.supervisor):
            try:
                proc.kill()
            except psutil.Error:
                pass
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def task(redis_url, namespace, tmp_path):
    started: list[Task] = []

    def start(**kw) -> Task:
        started.append(Task(redis_url, namespace, tmp_path, **kw))
        return started[-1]

    yield start
    for t in started:
        t.cleanup()


def cli(redis_url: str, namespace: str, *args: str) -> int:
    return main(["--redis-url", redis_url, "--namespace", namespace, *args])


def test_a_successor_with_predecessor_stop_asks_a_stream_to_stop_at_a_batch_boundary(
    redis_client, redis_url, namespace, task, tmp_path
):
    from airflow_jrs.protocol import settings_for
    from airflow_jrs.protocol.recovery import _settle_supervised_predecessor
    from airflow_jrs.protocol.run import JobRun

    t = task(stream=True)
    t.kill()
    successor = RedisJobLease(redis_client, namespace, JOB, ttl=30)
    successor.take_over(successor.peek())  # the task is dead: its successor takes the job
    store = RedisJobResultStore(redis_client, namespace)
    intents = RedisIntentStore(redis_client, namespace, str(tmp_path / "specs"))
    jobs = RedisJobNamespace(
        redis_client, settings_for(namespace, output_root=str(tmp_path), spec_root=str(tmp_path / "specs"))
    )
    run = JobRun(jobs, store, intents, successor, JOB, "fp", Attempt("d", "stream", "r", 2), True, {})
    log = SimpleNamespace(warning=lambda *a: None, info=lambda *a: None)
    beat = _settle_supervised_predecessor(run, t.identity, "stop", log)  # the dead attempt's intent's fence
    assert beat is not None and beat.fence == t.identity
    request = RedisStopRequests(redis_client, namespace).get(JOB, t.identity)
    assert request.kind == STOP and "successor" in request.by and 'predecessor="stop"' in request.reason
    ended = RedisHeartbeats(redis_client, namespace).get(JOB)
    assert ended.state == "ended" and ended.exit_code == 0, "the driver was killed, not stopped"
    assert (t.out / "stopped-at-boundary").exists()
    assert read_outcome(t.control, t.identity)["ended"] == STOPPED
    assert store.get_entry(JOB) is None, "the orphan's supervisor wrote while its successor holds the job"


def test_cli_stop_of_an_orphaned_stream_ends_with_a_stopped_result(redis_client, redis_url, namespace, task, capsys):
    t = task(stream=True)
    t.kill()
    assert cli(redis_url, namespace, "stop", JOB) == 0
    assert f"fence {t.fence}" in capsys.readouterr().out
    wait_until(t.ended, 60, "the supervisor to end")
    ended = RedisHeartbeats(redis_client, namespace).get(JOB)
    assert ended.exit_code == 0 and (t.out / "stopped-at-boundary").exists(), "the driver was killed, not stopped"
    store = RedisJobResultStore(redis_client, namespace)
    result = store.get_entry(JOB).result
    assert result.status is JobStatus.STOPPED, result
    assert result.checkpoint_location == t.checkpoint and result.metrics["boundary"] is True
    assert "stop requested by airflow-jrs stop" in result.error and result.attempt == Attempt("d", "stream", "r", 1)
    assert redis_client.exists(store.keys.intent(JOB), store.keys.lease(JOB)) == 0


def test_a_cancel_while_a_stop_is_stuck_kills_and_records_canceled(redis_client, redis_url, namespace, task):
    t = task(stream=True, mode="stuck", stop_timeout=3600)
    t.kill()
    assert cli(redis_url, namespace, "stop", JOB) == 0
    wait_until(lambda: Path(t.control, "request.json").exists(), 30, "the stop to reach the driver's control file")
    assert t.child.is_running(), "a stop must wait for the batch boundary (stop_timeout is an hour)"
    assert cli(redis_url, namespace, "stop", JOB) == 0  # asked again: still a stop
    assert cli(redis_url, namespace, "cancel", JOB) == 0
    assert cli(redis_url, namespace, "stop", JOB) == 0  # never downgrades the cancel
    assert RedisStopRequests(redis_client, namespace).get(JOB, t.fence).kind == CANCEL
    wait_until(t.ended, 60, "the supervisor to end")
    ended = RedisHeartbeats(redis_client, namespace).get(JOB)
    assert ended.exit_code in (128 + signal.SIGTERM, 128 + signal.SIGKILL), "the stuck driver was not killed"
    result = RedisJobResultStore(redis_client, namespace).get_entry(JOB).result
    assert result.status is JobStatus.CANCELED and "cancel requested by airflow-jrs cancel" in result.error


def test_a_batch_stop_through_the_same_path_terminates_with_a_grace_period(redis_client, redis_url, namespace, task):
    t = task(stream=False)
    assert cli(redis_url, namespace, "stop", JOB) == 0  # a batch job, its task alive
    wait_until(t.ended, 60, "the supervisor to end")
    assert (t.out / "terminated").read_text() == "SIGTERM", "spark-submit got no SIGTERM before the kill"
    ended = RedisHeartbeats(redis_client, namespace).get(JOB)
    assert ended.state == "ended" and ended.exit_code == 143  # it shut down in its grace period
    # The task is alive: it, not the supervisor, records the outcome (nothing written here).
    assert RedisJobResultStore(redis_client, namespace).get_entry(JOB) is None


# -- what an orphan's supervisor must NOT record ---------------------------------------------------

#: A batch spark-submit that, on SIGTERM, waits for ``<out>/go`` before it exits 143: the test
#: changes the world (a successor appears) while the supervisor waits for it.
BATCH_HELD = """
import os, pathlib, signal, sys, time
out = pathlib.Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
def term(*_):
    (out / "terminated").write_text("SIGTERM")
    while not (out / "go").exists():
        time.sleep(0.05)
    sys.exit(143)
signal.signal(signal.SIGTERM, term)
(out / "started").write_text(str(os.getpid()))
while True:
    time.sleep(0.1)
"""

#: A batch spark-submit whose application finishes as the cancel arrives: on SIGTERM it writes the
#: commit marker of its job and fence (what write_commit_marker writes) and exits 0 (or, as
#: spark-submit terminated while Spark shuts down after the marker does, 143).
BATCH_COMMITS = """
import json, os, pathlib, signal, sys, time
out, staging, job = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
fence = int(sys.argv[4].split(":")[0])  # the marker's fence is the token (spark.jrs.fence)
out.mkdir(parents=True, exist_ok=True)
def term(*_):
    staging.mkdir(parents=True, exist_ok=True)
    marker = {"v": 1, "application_id": "local-1700000000000", "job_id": job, "fence": fence,
              "metrics": {"rows": 3}, "written_at": "2026-01-01T00:00:00+00:00"}
    (staging / "_JRS_COMMIT.json").write_text(json.dumps(marker))
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
(out / "started").write_text(str(os.getpid()))
while True:
    time.sleep(0.1)
"""


def test_an_orphan_cancel_never_replaces_a_succeeded_result_of_another_fingerprint(
    redis_client, redis_url, namespace, task
):
    # Finding 4: the old code's result ("fp-old") is done; a run of new code ("fp") is canceled.
    store = RedisJobResultStore(redis_client, namespace)
    good = store.create_dirty_result(
        JobResult(job_id=JOB, status=JobStatus.SUCCEEDED, fingerprint="fp-old", outputs={"output": "/old"})
    )
    t = task(stream=False)
    t.kill()
    assert cli(redis_url, namespace, "cancel", JOB) == 0
    wait_until(t.ended, 60, "the supervisor to end")
    entry = store.get_entry(JOB)
    assert entry is not None and entry.result == good.result, f"the SUCCEEDED result was replaced: {entry}"
    assert store.get_history(JOB) == []


def test_an_orphan_supervisor_never_records_over_a_successor_that_got_the_same_token(
    redis_client, redis_url, namespace, task
):
    # Finding 6: a failover lost the INCR, and successor B holds token N again, with another
    # nonce. The orphaned supervisor of fence N (the first nonce) must not take B's lease over.
    t = task(stream=False, batch=BATCH_HELD)
    t.kill()
    assert cli(redis_url, namespace, "stop", JOB) == 0
    wait_until(lambda: (t.out / "terminated").exists(), 60, "spark-submit to get its SIGTERM")
    keys = RedisJobResultStore(redis_client, namespace).keys
    redis_client.hset(keys.lease(JOB), "nonce", "c3" * 8)  # B: same token, its own nonce
    intent = json.loads(redis_client.get(keys.intent(JOB)))
    redis_client.set(keys.intent(JOB), json.dumps({**intent, "nonce": "c3" * 8}))
    (t.out / "go").write_text("")
    wait_until(t.ended, 60, "the supervisor to end")
    assert RedisJobResultStore(redis_client, namespace).get_entry(JOB) is None, "it recorded over B"
    assert redis_client.hget(keys.lease(JOB), "nonce") == b"c3" * 8, "it took B's lease over"
    assert redis_client.exists(keys.intent(JOB)) == 1, "it dropped B's intent"


@pytest.mark.parametrize("application_id", ["application_1700000000000_0001", "driver-20260101000000-0001"])
def test_an_orphan_cancel_of_a_cluster_driver_records_nothing_and_keeps_the_intent(
    redis_client, redis_url, namespace, task, application_id
):
    # Finding 1 (supervisor side): ending spark-submit does not end a cluster-mode driver.
    t = task(stream=False, application_id=application_id)
    t.kill()
    assert cli(redis_url, namespace, "cancel", JOB) == 0
    wait_until(t.ended, 60, "the supervisor to end")
    store = RedisJobResultStore(redis_client, namespace)
    assert store.get_entry(JOB) is None, "CANCELED says 'run again' while the driver may still run"
    assert redis_client.exists(store.keys.intent(JOB)) == 1, "the next attempt needs the intent to find the driver"
    assert "may still run" in t.log.read_text()


@pytest.mark.parametrize("exit_code", [0, 128 + signal.SIGTERM])
def test_an_orphan_cancel_that_came_after_the_commit_records_nothing_and_the_next_attempt_adopts(
    redis_client, redis_url, namespace, task, tmp_path, exit_code
):
    # Finding 5: this fence's commit marker is there, whatever spark-submit's exit code: the output
    # is complete. The supervisor records nothing; the next attempt adopts it, launching nothing.
    from airflow_jrs.protocol import ADOPTED, JobAttempt, JobSpec, settings_for
    from jrs_testbench.launchers import Recording

    t = task(stream=False, batch=BATCH_COMMITS.replace("sys.exit(0)", f"sys.exit({exit_code})"))
    t.kill()
    assert cli(redis_url, namespace, "cancel", JOB) == 0
    wait_until(t.ended, 60, "the supervisor to end")
    assert RedisHeartbeats(redis_client, namespace).get(JOB).exit_code == exit_code
    store = RedisJobResultStore(redis_client, namespace)
    assert store.get_entry(JOB) is None, "CANCELED was recorded over complete output"
    assert redis_client.exists(store.keys.intent(JOB)) == 1, "the next attempt adopts the output from the intent"

    jobs = RedisJobNamespace(redis_client, settings_for(namespace, output_root=str(tmp_path / "out"),
                                                   spec_root=str(tmp_path / "specs")))  # fmt: skip
    launcher = Recording()
    outcome = JobAttempt(jobs, JobSpec(JOB, "fp"), Attempt("d", "stream", "r", 2), launcher).run()
    assert (outcome.kind, outcome.adopted_from, launcher.launched) == (ADOPTED, t.fence, 0)
    entry = store.get_entry(JOB)
    assert entry is not None and entry.result.status is JobStatus.SUCCEEDED
    assert entry.result.outputs["output"] == t.staging


def test_an_earlier_holders_outcome_file_of_the_same_token_is_not_this_attempts(
    redis_client, redis_url, namespace, task
):
    # Finding 6: control files are named by fence identity. A failover re-issued token N; the
    # earlier holder of N (another nonce) left "stopped" in the stream's control folder. This
    # attempt's driver is canceled (it never stopped): its outcome is CANCELED, not that file's.
    t = task(stream=True, mode="stuck")
    stale = {"v": 1, "ended": "stopped", "fence": t.fence, "last_batch_id": 99, "boundary": True}
    Path(t.control).mkdir(parents=True, exist_ok=True)
    Path(outcome_path(t.control, Fence(t.fence, "c3" * 8))).write_text(json.dumps(stale))
    t.kill()
    assert cli(redis_url, namespace, "cancel", JOB) == 0
    wait_until(t.ended, 60, "the supervisor to end")
    result = RedisJobResultStore(redis_client, namespace).get_entry(JOB).result
    assert result.status is JobStatus.CANCELED, f"another holder's outcome file was read as this one's: {result}"
