"""The Spark Connect launcher's names: the session URL a retry reattaches with, the tag, redaction;
where the server's UI shows a session's tasks, and the bounded wait for them."""

from __future__ import annotations

import logging

import pytest

from airflow_jrs.launch.connect_launcher import job_tag, redacted, session_url

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
    assert ui_from(conf, "sc://spark.example:15002/;token=x") == ServerUi("http://spark.example:4050", "local-1")
    assert ui_from({**conf, "spark.ui.enabled": "false"}, "sc://spark.example:15002") is None


def test_waiting_for_lingering_tasks_gives_up_with_a_message_naming_the_session_and_the_ui():
    """A UI that keeps showing an active task of the session: past the timeout, the wait raises
    (the task fails and its retry looks again) rather than wait forever or start beside it."""
    import http.server
    import json
    import threading

    from airflow_jrs.launch.connect_tasks import LingeringTasks, ServerUi

    tags = "SparkConnect_OperationTag_User__Session_{}_Operation_o"
    jobs = [
        {"status": "FAILED", "numActiveTasks": 1, "jobTags": [tags.format("s-1")]},
        {"status": "RUNNING", "numActiveTasks": 3, "jobTags": [tags.format("s-2")]},
    ]

    class Ui(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps(jobs if self.path == "/api/v1/applications/app-1/jobs" else []).encode()
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
    # no UI to ask: logged, and read as "none" (documented)
    assert LingeringTasks(None, "s-1", logging.getLogger("test"), missing="no UI").running() is False
