"""The Spark Connect launcher's names: the session URL a retry reattaches with, the tag, redaction;
where the server's UI shows a session's tasks, and the bounded wait for them."""

from __future__ import annotations

import http.server
import json
import logging
import socket
import threading

import pytest

from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.launch.connect_launcher import job_tag, redacted, session_url
from airflow_jrs.launch.connect_tasks import LingeringTasks, ServerUi, TasksUnknown, proceeds_unseen, ui_from
from airflow_jrs.store.redis.leases import RedisJobLease
from airflow_jrs.store.redis.namespace import RedisJobNamespace

SID = "5f0c2a9e-1111-4222-8333-444455556666"


def test_the_session_id_joins_the_urls_parameters_whatever_the_provider_made_of_them():
    assert session_url("sc://h:15002", SID) == f"sc://h:15002/;session_id={SID}"
    assert session_url("sc://h:15002/", SID) == f"sc://h:15002/;session_id={SID}"  # SparkConnectHook's shape
    assert session_url("sc://h:15002/;user_id=airflow;use_ssl=True", SID) == (
        f"sc://h:15002/;user_id=airflow;use_ssl=True;session_id={SID}"
    )


def test_the_token_never_reaches_the_spec_or_the_log():
    assert redacted("sc://h/;user_id=a;token=s3cret;use_ssl=True") == "sc://h/;user_id=a;token=***;use_ssl=True"
    assert redacted("sc://h/;token=s3cret") == "sc://h/;token=***"


def test_the_tag_names_namespace_job_and_fence_and_has_no_comma():
    assert job_tag("prod", "d.t.2013-01-01", 7) == "jrs-prod-d.t.2013-01-01-f7"
    assert "," not in job_tag("prod", "a,b", 1)


def test_the_servers_ui_is_on_the_connect_host_at_its_ui_port_unless_disabled():
    from airflow_jrs.launch.connect_tasks import ServerUi, ui_from

    conf = {"spark.ui.enabled": "true", "spark.ui.port": "4050", "spark.app.id": "local-1"}
    assert ui_from(conf, "sc://spark.example:15002/;token=x") == ServerUi("http://spark.example:4050", "local-1", 16)
    assert ui_from({**conf, "spark.port.maxRetries": "3"}, "sc://h:1").candidates() == [
        "http://h:4050", "http://h:4051", "http://h:4052", "http://h:4053"
    ]  # fmt: skip
    assert ui_from({**conf, "spark.ui.enabled": "false"}, "sc://spark.example:15002") is None


def test_waiting_for_lingering_tasks_gives_up_with_a_message_naming_the_session_and_the_ui():
    """A UI that keeps showing an active task of the session: past the timeout, the wait raises
    (the task fails and its retry looks again) rather than wait forever or start beside it."""
    tags = "SparkConnect_OperationTag_User__Session_{}_Operation_o"
    jobs = [
        {"status": "FAILED", "numActiveTasks": 1, "jobTags": [tags.format("s-1")]},
        {"status": "RUNNING", "numActiveTasks": 3, "jobTags": [tags.format("s-2")]},
    ]

    class Ui(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            apps = [{"id": "app-1"}] if self.path == "/api/v1/applications" else []
            body = json.dumps(jobs if self.path == "/api/v1/applications/app-1/jobs" else apps).encode()
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Ui)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        ui = ServerUi(f"http://127.0.0.1:{server.server_address[1]}", "app-1")
        assert ui.session_tasks("s-1") == 1 and ui.session_tasks("s-2") == 3 and ui.session_tasks("s-3") == 0
        lingering = LingeringTasks(ui, "s-1", logging.getLogger("test"), timeout=0)
        assert lingering.running() is True  # the first look starts the clock
        with pytest.raises(RuntimeError, match=r"session s-1: 1 Spark task\(s\) still run.*127\.0\.0\.1"):
            while lingering.running():
                pass
    finally:
        server.shutdown()
        server.server_close()
    # no UI to ask: unknown, so the caller fails closed, unless the connection opted out (documented)
    with pytest.raises(TasksUnknown, match=r"session s-1: cannot see .*no UI.*jrs\.connect\.unseenTasks=proceed"):
        LingeringTasks(None, "s-1", logging.getLogger("test"), missing="no UI").running()
    assert LingeringTasks(None, "s-1", logging.getLogger("test"), missing="no UI", proceed=True).running() is False


# -- which UI is the server's: real HTTP listeners on neighbouring ports ------------------------

TAG = "SparkConnect_OperationTag_User__Session_{}_Operation_o"


class FakeUi:
    """A local HTTP listener answering like a Spark UI's REST API for ``app_id`` (``None``: 404
    for everything, like a web server that is no Spark UI)."""

    def __init__(self, port: int, app_id: str | None, jobs: list[dict] | None = None) -> None:
        app, body = app_id, jobs or []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if app is None:
                    self.send_error(404)
                    return
                if self.path == "/api/v1/applications":
                    payload: object = [{"id": app, "name": "Spark Connect server"}]
                elif self.path == f"/api/v1/applications/{app}/jobs":
                    payload = body
                else:
                    self.send_error(404, "unknown app")
                    return
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def free_ports(n: int) -> int:
    """The first of ``n`` neighbouring free ports on 127.0.0.1."""
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first = probe.getsockname()[1]
        if first + n > 65535:
            continue
        socks = []
        try:
            for port in range(first, first + n):
                sock = socket.socket()
                socks.append(sock)
                sock.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
    raise RuntimeError("no neighbouring free ports")


@pytest.fixture
def uis():
    made: list[FakeUi] = []
    yield lambda port, app_id, jobs=None: made.append(FakeUi(port, app_id, jobs)) or made[-1]
    for ui in made:
        ui.close()


def test_when_the_ui_port_is_taken_by_another_application_the_servers_ui_is_found_on_the_next_port(uis):
    """Spark binds spark.ui.port+1.. when the port is taken: what answers on the configured port
    is another application, whose REST API 404s for the server's app id. Read as "did not
    answer", the wait went ahead beside the server's running task; it must look further."""
    port = free_ports(3)
    uis(port, "app-other")
    uis(port + 1, None)  # not a Spark UI at all
    uis(port + 2, "app-server", [{"status": "FAILED", "numActiveTasks": 2, "jobTags": [TAG.format("s-1")]}])
    ui = ui_from({"spark.ui.port": str(port), "spark.app.id": "app-server", "spark.port.maxRetries": "16"},
                 "sc://127.0.0.1:15002")  # fmt: skip
    assert ui is not None and ui.found() == f"http://127.0.0.1:{port + 2}"
    assert ui.session_tasks("s-1") == 2
    assert LingeringTasks(ui, "s-1", logging.getLogger("test")).running() is True


@pytest.mark.parametrize("answers", ["another application", "404", "nothing"])
def test_a_ui_that_is_not_the_servers_is_unknown_and_fails_closed_unless_opted_out(uis, answers):
    """No port within spark.port.maxRetries lists the server's app id: unknown is not "no task
    runs" (before, a 404 or another application's answer let the caller go ahead)."""
    port = free_ports(3)
    if answers == "another application":
        uis(port, "app-other", [])
    elif answers == "404":
        uis(port, None)
    ui = ServerUi(f"http://127.0.0.1:{port}", "app-server", retries=2)
    with pytest.raises(TasksUnknown, match=rf"session s-1: cannot see .*127\.0\.0\.1:{port}.*app-server"):
        LingeringTasks(ui, "s-1", logging.getLogger("test")).running()
    assert LingeringTasks(ui, "s-1", logging.getLogger("test"), proceed=True).running() is False


def test_the_opt_out_takes_fail_or_proceed_only():
    assert proceeds_unseen({}) is False and proceeds_unseen({"jrs.connect.unseenTasks": "proceed"}) is True
    with pytest.raises(JrsConfigError, match=r"jrs\.connect\.unseenTasks='yes'.*'fail'.*'proceed'"):
        proceeds_unseen({"jrs.connect.unseenTasks": "yes"})


# -- a failed attempt whose cancelled tasks still run: the attempt protocol on a real Redis ------

JOB = "d.t.2013-01-01"


@pytest.fixture
def jobs(redis_url, namespace, tmp_path):
    from airflow_jrs.protocol import settings_for

    settings = settings_for(namespace, output_root=str(tmp_path / "out"), spec_root=str(tmp_path / "specs"))
    jobs = RedisJobNamespace.from_url(redis_url, settings)
    yield jobs
    jobs.close()


class FailingConnectAttempt:
    """:class:`ConnectLauncher` whose function failed after its session started: :meth:`run` is
    the product's failure path (the session's UI as read at start, then ``_end_work``, then the
    function's error). Only the interrupt RPC is left out (no Connect server here: it reports the
    session's operations ended, which is when the cancelled job's tasks linger)."""

    @staticmethod
    def make(ui: ServerUi | None, conf: dict[str, str]):
        from airflow_jrs.launch.connect_launcher import ConnectLauncher

        class Launcher(ConnectLauncher):
            def run(self, launch):
                if not self._remote():
                    raise AssertionError("the settings name an sc:// URL")
                self._ui, self._ui_missing = ui, "the server runs no Spark UI (spark.ui.enabled=false)"
                try:
                    raise ValueError("the function failed")
                finally:
                    self._end_work(launch.job_id)

        return Launcher(
            lambda spark, ctx: None, lambda: ("sc://127.0.0.1:1", dict(conf)),
            callable_name="f", log=logging.getLogger("test"),
        )  # fmt: skip


@pytest.mark.parametrize("case", ["tasks run on past the bound", "the UI is another application's", "no UI"])
def test_a_failed_attempt_whose_cancelled_tasks_may_still_run_records_nothing_and_keeps_its_intent(
    jobs, uis, monkeypatch, case
):
    """Before, ``_end_work`` logged the timeout and returned: the failure was recorded, the intent
    cleared and the lease released while the tasks still ran, so the retry computed beside them.
    Now the lease is renewed while it waits, and past the bound (or when the UI cannot show the
    tasks) the attempt fails closed: no result, the intent (naming the session) stays, so the
    retry's predecessor check waits for those tasks."""
    import airflow_jrs.launch.connect_launcher as connect_launcher
    import airflow_jrs.launch.connect_tasks as connect_tasks
    from airflow_jrs.exceptions import DriverMayStillRunError
    from airflow_jrs.protocol import JobAttempt, JobSpec
    from airflow_jrs.store import Attempt

    monkeypatch.setattr(connect_launcher, "interrupt_session", lambda url: [])
    monkeypatch.setattr(connect_tasks, "TASKS_TIMEOUT", 0.5)
    holders: list[object] = []
    port = free_ports(1)
    jobs_seen = [{"status": "FAILED", "numActiveTasks": 1, "jobTags": [TAG.format("SID")]}]
    ui: ServerUi | None = ServerUi(f"http://127.0.0.1:{port}", "app-server")
    if case == "tasks run on past the bound":
        fake = uis(port, "app-server", jobs_seen)
        handler = fake.server.RequestHandlerClass
        answer = handler.do_GET

        def looked(self):  # the lease, each time the attempt looks at the tasks
            holders.append(RedisJobLease(jobs.client, jobs.namespace, JOB).peek())
            answer(self)

        handler.do_GET = looked
    elif case == "the UI is another application's":
        uis(port, "app-other", jobs_seen)
    else:
        ui = None
    launcher = FailingConnectAttempt.make(ui, {})
    real_prepare = launcher.prepare

    def prepare(launch):  # the session the fake UI's jobs belong to
        spec = real_prepare(launch)
        jobs_seen[0]["jobTags"] = [TAG.format(launcher.session_id)]
        return spec

    launcher.prepare = prepare
    attempt = JobAttempt(jobs, JobSpec(JOB, "fp"), Attempt("d", "t", "r", 1), launcher)
    with pytest.raises(DriverMayStillRunError, match=r"Spark Connect session .* may still run.*intent stays"):
        attempt.run()
    assert jobs.results.get_entry(JOB) is None, "a result was written while the cancelled tasks may still run"
    intent = jobs.intents.get(JOB)
    assert intent is not None and intent.session_id == launcher.session_id, "the retry could not find the session"
    if case == "tasks run on past the bound":
        assert len(holders) > 1 and all(h is not None for h in holders), "the lease went while the tasks ran"

    # opted out: the attempt goes ahead as before and records its failure
    launcher = FailingConnectAttempt.make(ui, {"jrs.connect.unseenTasks": "proceed"})
    if case != "tasks run on past the bound":
        other = "d.t.2013-01-02"
        with pytest.raises(ValueError, match="the function failed"):
            JobAttempt(jobs, JobSpec(other, "fp"), Attempt("d", "t", "r", 1), launcher).run()
        assert jobs.intents.get(other) is None, "opted out: the failure is recorded as before"


# -- which server a predecessor's session is on: compared by host and port ---------------------


def test_a_servers_address_is_its_host_and_port_with_connects_default_port():
    from airflow_jrs.launch.connect_server import server_address

    assert server_address("sc://Spark.Example:15003/;user_id=a;token=***") == "spark.example:15003"
    assert server_address("sc://spark.example") == server_address("sc://spark.example:15002/") == "spark.example:15002"
    assert server_address("sc://[::1]:15002/;use_ssl=true") == "[::1]:15002"
    with pytest.raises(ValueError, match="not a Spark Connect URL"):
        server_address("spark://h:7077")


@pytest.mark.parametrize("spec", ["missing", "no remote", "another server", "same server"])
def test_a_successor_asks_only_the_server_the_predecessors_spec_records(tmp_path, spec):
    """Any other server answers "session not found" for the predecessor's session, which reads as
    "nothing runs": a mismatch, or a spec that cannot say, fails closed naming what to do."""
    from airflow_jrs.launch.connect_server import check_same_server
    from airflow_jrs.store.intents import Intent

    path = tmp_path / "spec.json"
    remote = {"another server": "sc://a.example:15002/;token=***", "same server": "sc://b.example/;token=***"}
    if spec != "missing":
        path.write_text(json.dumps({"launcher": "spark-connect", "session_id": SID, "remote": remote.get(spec)}))
    stale = Intent(job_id=JOB, fence=3, spec_uri=str(path), staging="/s", app_name="a", host="h", pid=1,
                   started_at=0.0, session_id=SID)  # fmt: skip
    if spec == "same server":
        check_same_server("prod", stale, "sc://B.example:15002/;user_id=x;token=s3cret", logging.getLogger("test"))
        return
    why = {
        "missing": "airflow-jrs cannot tell which server it was opened on: its spec .* could not be read",
        "no remote": "airflow-jrs cannot tell which server it was opened on: its spec .* records no Spark Connect "
        "server",
        "another server": "it was opened on a.example:15002, but the connection now names b.example:15002",
    }[spec]
    with pytest.raises(JrsConfigError, match=rf"job {JOB}: the predecessor \(fence 3\) ran in Spark Connect session "
                       rf"{SID}, and {why}.*starts nothing.*Point the connection.*delete the job's intent in "
                       "namespace 'prod'"):  # fmt: skip
        check_same_server("prod", stale, "sc://b.example/;user_id=x", logging.getLogger("test"))
