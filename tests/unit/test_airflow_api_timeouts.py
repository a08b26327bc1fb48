"""A slow API server: what the CLI's REST client does when a call gets no answer in time.

An API server on SQLite can hold a request behind the scheduler's writes for longer than the
client waits (seen on Airflow 3.2.2 in the older-minor stage: a missing-only backfill failed with
"cannot reach Airflow's API (timed out)"). A real HTTP server here answers each call after a
delay the test sets; the client's timeout is 0.3 s.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from airflow_jrs.actions.airflow_api import AirflowApi, AirflowApiError
from airflow_jrs.actions.backfill import DatePlan, _one_run

TIMEOUT = 0.3
DAY = datetime(2013, 1, 3, tzinfo=UTC)


class SlowApi(ThreadingHTTPServer):
    """Answers ``GET`` and ``POST`` on ``/api/v2/dags/d/dagRuns`` after the delays in ``stalls``
    (one per call, in order; none left: at once). A POST makes a run, even when the client has
    stopped waiting for it, except the first ``lost_posts`` ones."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.stalls: list[float] = []
        self.calls: list[str] = []
        self.runs: list[dict[str, Any]] = []
        self.lost_posts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    server: SlowApi

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self, status: int, doc: Any) -> None:
        self.server.calls.append(f"{self.command} {self.path.split('?')[0]}")
        if self.server.stalls:
            time.sleep(self.server.stalls.pop(0))
        body = json.dumps(doc).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:  # the client gave up waiting
            pass

    def do_GET(self) -> None:
        self._answer(200, {"dag_runs": self.server.runs, "total_entries": len(self.server.runs)})

    def do_POST(self) -> None:
        doc = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.server.lost_posts:
            self.server.lost_posts -= 1
            self._answer(500, {})
            return
        run = {"dag_run_id": f"run-{len(self.server.runs)}", "logical_date": doc["logical_date"], "state": "queued"}
        self.server.runs.append(run)
        self._answer(200, run)


@pytest.fixture
def server() -> Iterator[SlowApi]:
    srv = SlowApi()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def api(server: SlowApi) -> AirflowApi:
    return AirflowApi(server.url, token="t", timeout=TIMEOUT)


def test_a_get_that_timed_out_is_asked_once_more(server):
    server.stalls = [1.0]
    assert api(server).dag_runs("d", DAY, DAY) == []
    assert server.calls == ["GET /api/v2/dags/d/dagRuns"] * 2


def test_a_get_that_times_out_twice_names_the_call_and_the_wait(server):
    server.stalls = [1.0, 1.0]
    with pytest.raises(AirflowApiError) as caught:
        api(server).dag_runs("d", DAY, DAY)
    assert caught.value.timed_out and caught.value.unreachable
    message = str(caught.value)
    assert f"cannot reach Airflow's API at {server.url} (GET /api/v2/dags/d/dagRuns got no answer in 0.3 s)" in message
    assert "--airflow-url" in message


def test_a_post_that_timed_out_is_not_posted_again_by_the_client(server):
    server.stalls = [1.0]
    with pytest.raises(AirflowApiError, match=r"POST /api/v2/dags/d/dagRuns got no answer in 0\.3 s"):
        api(server).trigger_run("d", DAY, None)
    assert server.calls == ["POST /api/v2/dags/d/dagRuns"]


def test_a_run_whose_trigger_timed_out_but_was_made_is_found_not_made_twice(server):
    server.stalls = [1.0]  # the POST makes the run, then answers too late
    plan = DatePlan(DAY, (DAY, DAY + timedelta(days=1)))
    run_id, action = _one_run(api(server), "d", plan, None)
    assert (run_id, action) == ("run-0", "triggered")
    assert len(server.runs) == 1
    assert server.calls == ["POST /api/v2/dags/d/dagRuns", "GET /api/v2/dags/d/dagRuns"]


def test_a_run_whose_trigger_timed_out_and_was_not_made_is_posted_once_more(server):
    server.stalls, server.lost_posts = [1.0], 1
    plan = DatePlan(DAY, (DAY, DAY + timedelta(days=1)))
    assert _one_run(api(server), "d", plan, None) == ("run-0", "triggered")
    assert len(server.runs) == 1
    assert server.calls == ["POST /api/v2/dags/d/dagRuns", "GET /api/v2/dags/d/dagRuns", "POST /api/v2/dags/d/dagRuns"]


@pytest.mark.parametrize("value", ["", "90", "2.5"])
def test_the_timeout_comes_from_the_environment(monkeypatch, value):
    monkeypatch.setenv("AIRFLOW_JRS_API_TIMEOUT", value)
    assert AirflowApi.from_environment("http://127.0.0.1:1").timeout == (float(value) if value else 30.0)


@pytest.mark.parametrize("value", ["soon", "0", "-5", "inf", "nan"])
def test_a_bad_timeout_is_refused_naming_the_variable_and_the_fix(monkeypatch, value):
    monkeypatch.setenv("AIRFLOW_JRS_API_TIMEOUT", value)
    with pytest.raises(AirflowApiError, match=r"AIRFLOW_JRS_API_TIMEOUT=.*above 0.*unset it for 30 s"):
        AirflowApi.from_environment("http://127.0.0.1:1")
