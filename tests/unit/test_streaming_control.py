"""Stop and cancel (FLIP-45) without Spark: paths, requests, statuses, the CLI and on_kill's escalation.

Real Redis and real files; the Spark-side behaviour is proven in tests/spark/test_streaming.py.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import redis

from airflow_jrs.cli import main
from airflow_jrs.domain.decision import decide
from airflow_jrs.domain.paths import (
    checkpoint_path,
    control_path,
    control_path_of_output,
    fence_name,
    stream_output_path,
)
from airflow_jrs.domain.wait import evaluate
from airflow_jrs.exceptions import JobResultEntryAlreadyExistsError
from airflow_jrs.spark.control import (
    CANCEL,
    STOP,
    outcome_path,
    read_request,
    requested_kind,
    write_request,
)
from airflow_jrs.store import Attempt, EntryState, JobResult, JobResultEntry, JobStatus, RedisJobResultStore
from airflow_jrs.store.intents import Intent
from airflow_jrs.store.leases.fence import Fence
from airflow_jrs.store.redis.intents import RedisIntentStore
from airflow_jrs.store.redis.leases import RedisJobLease
from airflow_jrs.store.redis.namespace import RedisJobNamespace

JOB = "d.stream.2013-01-01"


def test_stream_folders_are_per_job_not_per_fence_and_beside_the_attempts():
    assert checkpoint_path("/out/", "ns", "a/b") == "/out/ns/a_b/stream/checkpoint"
    assert stream_output_path("s3://bkt/out", "ns", JOB) == f"s3://bkt/out/ns/{JOB}/stream/output"
    assert control_path("/out", "ns", JOB) == f"/out/ns/{JOB}/stream/control"
    assert control_path_of_output(stream_output_path("/out", "ns", JOB)) == control_path("/out", "ns", JOB)
    assert control_path_of_output(f"/out/ns/{JOB}/fence-3") is None  # a batch job's staging


def test_a_request_targets_one_fence_and_a_cancel_is_never_downgraded(tmp_path):
    control = str(tmp_path / "control")
    assert requested_kind(control, 5) is None
    write_request(control, STOP, 5, by="test")
    assert requested_kind(control, 5) == STOP
    assert requested_kind(control, 6) is None, "a stale request must not stop the next attempt"
    write_request(control, CANCEL, 5, by="test")
    write_request(control, STOP, 5, by="test")  # a stop after a cancel leaves the cancel
    assert requested_kind(control, 5) == CANCEL
    (tmp_path / "control" / "request.json").write_text("{half")  # unreadable: not a request
    assert read_request(control) is None and requested_kind(control, 5) is None


def test_a_request_and_an_outcome_belong_to_one_fence_identity_not_only_its_token(tmp_path):
    # A failover can hand token 5 to two holders (nonces aa.., bb..).
    control = str(tmp_path / "control")
    first, second = Fence(5, "aa" * 8), Fence(5, "bb" * 8)
    write_request(control, STOP, first, by="test")
    assert requested_kind(control, first) == STOP
    assert requested_kind(control, second) is None, "a request for the other holder of token 5"
    assert requested_kind(control, 5) == STOP  # a driver that knows only its token (no nonce conf)
    assert outcome_path(control, first) != outcome_path(control, second)
    assert outcome_path(control, first).endswith(f"/ended-{fence_name(first)}.json")
    assert outcome_path(control, 5).endswith("/ended-fence-5.json")


def test_stopped_and_canceled_results_make_the_job_run_again_and_stay_in_history(redis_url, namespace):
    store = RedisJobResultStore(redis_url, namespace)
    stopped = JobResult(job_id=JOB, status=JobStatus.STOPPED, checkpoint_location="/cp", metrics={"last_batch_id": 3})
    store.create_dirty_result(stopped)
    decision = decide(store.get_entry(JOB), "fp")
    assert not decision.skip and decision.supersede, "a STOPPED stream is not a completed job"
    with pytest.raises(JobResultEntryAlreadyExistsError):  # never lost by a plain create
        store.create_dirty_result(JobResult(job_id=JOB, status=JobStatus.SUCCEEDED))
    assert store.get_entry(JOB).result.status is JobStatus.STOPPED
    store.create_dirty_result(JobResult(job_id=JOB, status=JobStatus.CANCELED), supersede=True)
    store.create_dirty_result(JobResult(job_id=JOB, status=JobStatus.SUCCEEDED, fingerprint="fp"), supersede=True)
    assert store.get_entry(JOB).result.status is JobStatus.SUCCEEDED
    history = [e.result for e in store.get_history(JOB)]
    assert [r.status for r in history] == [JobStatus.CANCELED, JobStatus.STOPPED]
    assert history[1].checkpoint_location == "/cp" and history[1].metrics == {"last_batch_id": 3}
    assert decide(store.get_entry(JOB), "fp").skip


@pytest.mark.parametrize("status", [JobStatus.STOPPED, JobStatus.CANCELED])
def test_a_waiting_sensor_never_takes_a_stopped_or_canceled_stream_for_success(status):
    entry = JobResultEntry(JobResult(job_id=JOB, status=status), EntryState.DIRTY)
    assert evaluate([JOB], {JOB: entry}, namespace="ns").failed_job_id == JOB
    waiting = evaluate([JOB], {JOB: entry}, namespace="ns", fail_on_unsuccessful=False)
    assert not waiting.done and JOB in waiting.waiting


@pytest.fixture
def running_stream(redis_client: redis.Redis, namespace: str, tmp_path: Path):
    lease = RedisJobLease(redis_client, namespace, JOB, ttl=30)
    token = lease.acquire()
    intents = RedisIntentStore(redis_client, namespace, str(tmp_path / "specs"))
    output = stream_output_path(str(tmp_path / "out"), namespace, JOB)
    intent = Intent(
        job_id=JOB, fence=token, spec_uri=intents.spec_uri(JOB, token), staging=output, app_name="a",
        host="h", pid=1, started_at=time.time(),
    )  # fmt: skip
    intents.record(intent, {"application": "app.py"})
    yield lease, intents, control_path(str(tmp_path / "out"), namespace, JOB)
    lease.release()


def test_cli_stop_and_cancel_reach_the_running_attempt_only(redis_url, namespace, running_stream, capsys):
    lease, _, control = running_stream
    base = ["--redis-url", redis_url, "--namespace", namespace]
    assert main([*base, "stop", JOB]) == 0
    assert f"fence {lease.token}" in capsys.readouterr().out
    assert requested_kind(control, lease.token) == STOP
    assert main([*base, "cancel", JOB]) == 0
    assert requested_kind(control, lease.token) == CANCEL
    assert read_request(control)["by"].startswith("airflow-jrs cancel")
    assert main([*base, "stop", "no.such.job"]) == 1  # not found (nothing running)
    assert "no running attempt" in capsys.readouterr().err


def _attempt(redis_client, namespace, lease, intents, tmp_path, *, alive):
    from airflow_jrs.launch.streaming import StreamAttempt, prepare
    from airflow_jrs.protocol import settings_for
    from airflow_jrs.protocol.run import JobRun

    store = RedisJobResultStore(redis_client, namespace)
    paths = prepare(str(tmp_path / "out"), namespace, JOB)
    jobs = RedisJobNamespace(
        redis_client, settings_for(namespace, output_root=str(tmp_path / "out"), spec_root=intents.spec_root)
    )
    run = JobRun(jobs, store, intents, lease, JOB, "fp", Attempt("d", "stream", "r", 1), True, {"output": ""})
    kills: list[float] = []

    def kill() -> None:
        kills.append(time.monotonic())
        alive.clear()

    return StreamAttempt(run, paths, lease.token, 60.0, alive=alive.is_set, kill=kill), store, kills


def test_on_kill_cancels_when_the_stop_does_not_finish_and_a_second_kill_cancels_at_once(
    redis_client, namespace, running_stream, tmp_path
):
    lease, intents, control = running_stream
    alive = threading.Event()
    alive.set()  # spark-submit "runs" and never honours the stop (a stuck stop)
    attempt, store, kills = _attempt(redis_client, namespace, lease, intents, tmp_path, alive=alive)
    attempt.stop_timeout = 0.5
    attempt.stop_then_cancel(by="on_kill")
    assert kills and requested_kind(control, lease.token) == CANCEL
    entry = store.get_entry(JOB)
    assert entry.result.status is JobStatus.CANCELED and entry.result.checkpoint_location == attempt.paths.checkpoint
    assert store.client.exists(store.keys.intent(JOB)) == 0

    # A second kill while the first waits for the stop cancels without waiting out stop_timeout.
    store.forget_result(JOB)
    alive.set()
    attempt2, _, kills2 = _attempt(redis_client, namespace, lease, intents, tmp_path, alive=alive)
    attempt2.stop_timeout = 3600.0
    second = threading.Timer(0.5, attempt2.stop_then_cancel, kwargs={"by": "second kill"})
    second.start()
    attempt2.stop_then_cancel(by="on_kill")  # returns because the second kill canceled
    second.join()
    assert kills2 and store.get_entry(JOB).result.status is JobStatus.CANCELED


def test_on_kill_records_stopped_when_the_driver_confirms_the_stop(redis_client, namespace, running_stream, tmp_path):
    import json

    lease, intents, control = running_stream
    alive = threading.Event()
    alive.set()
    attempt, store, _ = _attempt(redis_client, namespace, lease, intents, tmp_path, alive=alive)

    def driver() -> None:  # what streaming_job does on the stop request: write the outcome, exit
        while requested_kind(control, lease.token) != STOP:
            time.sleep(0.05)
        doc = {"v": 1, "ended": "stopped", "fence": lease.token, "last_batch_id": 4, "boundary": True}
        Path(outcome_path(control, lease.token)).write_text(json.dumps(doc))
        alive.clear()

    thread = threading.Thread(target=driver)
    thread.start()
    attempt.stop_then_cancel(by="on_kill")
    thread.join()
    result = store.get_entry(JOB).result
    assert result.status is JobStatus.STOPPED and result.metrics == {"last_batch_id": 4, "boundary": True}
    assert result.checkpoint_location == attempt.paths.checkpoint
    assert result.error == "stop requested by on_kill (the task was killed)"  # the request's own words


def _ended_on_request(launcher, launch):
    from airflow_jrs.exceptions import JobEndedOnRequestError

    with pytest.raises(JobEndedOnRequestError):
        launcher.check_ended_on_request(launch, None)
        launcher.finish(launch, JobResult(job_id=JOB, status=JobStatus.SUCCEEDED))


@pytest.mark.parametrize(
    ("kind", "by", "reason", "status"),
    [
        (STOP, "alice (Job results page)", "redeploy", JobStatus.STOPPED),
        (CANCEL, "the successor attempt (fence 99)", 'predecessor="stop"', JobStatus.CANCELED),
    ],
)
def test_a_stream_ended_on_request_records_who_asked_in_the_request_s_words(
    redis_client, namespace, running_stream, tmp_path, kind, by, reason, status
):
    """A stop from the UI or a successor's cancel is not recorded as `airflow-jrs stop`/`cancel`."""
    import json
    from types import SimpleNamespace

    from airflow_jrs.launch.streaming import StreamingLauncher

    lease, intents, control = running_stream
    attempt, store, _ = _attempt(redis_client, namespace, lease, intents, tmp_path, alive=threading.Event())
    launcher = StreamingLauncher(None, 60.0)  # type: ignore[arg-type]  # the wrapped launcher is not reached
    launcher.stream = attempt
    launch = SimpleNamespace(job_id=JOB, fence=lease.token)
    assert attempt.run.jobs.stop_requests.ask(JOB, lease.token, kind, by=by, reason=reason) is not None
    if kind == STOP:  # the driver confirmed the stop at a batch boundary and exited 0
        doc = {"v": 1, "ended": "stopped", "fence": lease.token, "last_batch_id": 2, "boundary": True}
        Path(control).mkdir(parents=True, exist_ok=True)
        Path(outcome_path(control, lease.token)).write_text(json.dumps(doc))
    _ended_on_request(launcher, launch)
    result = store.get_entry(JOB).result
    assert (result.status, result.error) == (status, f"{kind} requested by {by} ({reason})")


def test_a_stream_ended_on_request_keeps_the_cli_words_when_no_request_can_be_read(
    redis_client, namespace, running_stream, tmp_path
):
    """An unsupervised attempt's cancel went to its control file only: the words stay the CLI's."""
    from types import SimpleNamespace

    from airflow_jrs.launch.streaming import StreamingLauncher

    lease, intents, control = running_stream
    attempt, store, _ = _attempt(redis_client, namespace, lease, intents, tmp_path, alive=threading.Event())
    launcher = StreamingLauncher(None, 60.0)  # type: ignore[arg-type]
    launcher.stream = attempt
    write_request(control, CANCEL, lease.token, by="airflow-jrs cancel")
    _ended_on_request(launcher, SimpleNamespace(job_id=JOB, fence=lease.token))
    result = store.get_entry(JOB).result
    assert (result.status, result.error) == (JobStatus.CANCELED, "canceled on request (airflow-jrs cancel)")
