"""``airflow-jrs stats``: it prints the plugin's answer (views/stats.py) and reads no store.

A stand-in API server answers ``/auth/token`` and ``/jrs/api/stats`` with what the real route
computes from payload rows; the real route, on a real Airflow, is tests/airflow/test_stats_route.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from airflow_jrs.cli.app import main
from airflow_jrs.views.stats import PayloadRow, stats_json
from jrs_testbench.fake_http import FakeHttpServer, JsonHandler

SINCE = datetime(2024, 1, 1, tzinfo=UTC)


def _payload(seconds: int, reused: bool) -> dict[str, Any]:
    end = f"2024-01-01T00:{seconds // 60:02d}:{seconds % 60:02d}+00:00"
    return {"job_id": "d.t.1", "status": "SUCCEEDED", "reused": reused, "skipped": reused,
            "start_time": "2024-01-01T00:00:00+00:00", "end_time": end}  # fmt: skip


ROWS = [
    PayloadRow("etl", "r1", "t", -1, "return_value", _payload(600, False)),
    PayloadRow("etl", "r2", "t", -1, "return_value", _payload(600, True)),
    PayloadRow("etl", "r3", "t", -1, "jrs_result", _payload(600, True)),
    PayloadRow("small", "r1", "t", -1, "return_value", _payload(90, True)),
]


class Plugin(JsonHandler):
    asked: list[dict[str, list[str]]] = []

    def do_POST(self) -> None:  # /auth/token
        self._reply(201, {"access_token": "t0ken"})

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if self.headers.get("Authorization") != "Bearer t0ken":
            return self._reply(401, {"detail": "Not authenticated"})
        if url.path != "/jrs/api/stats":
            return self._reply(404, {"detail": "Not Found"})
        query = parse_qs(url.query)
        Plugin.asked.append(query)
        if query.get("dag_id") == ["secret"]:
            return self._reply(403, {"detail": "you may not read DAG 'secret'"})
        rows = [r for r in ROWS if r.dag_id in query.get("dag_id", [r.dag_id])]
        self._reply(200, stats_json(rows, since=SINCE, dag_id=(query.get("dag_id") or [None])[0]))


class FakePlugin(FakeHttpServer):
    def __init__(self) -> None:
        self._serve(Plugin)


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with FakePlugin() as server:
        monkeypatch.setenv("AIRFLOW_JRS_API_URL", server.url)
        monkeypatch.setenv("AIRFLOW_JRS_API_USERNAME", "viewer")
        monkeypatch.setenv("AIRFLOW_JRS_API_PASSWORD", "pw")
        monkeypatch.delenv("AIRFLOW_JRS_API_TOKEN", raising=False)
        Plugin.asked = []
        yield server.url


def test_stats_prints_the_routes_figures_by_dag_and_in_total_without_a_store(api, capsys, monkeypatch):
    # no store anywhere: a command that opened one would fail to connect
    monkeypatch.setenv("AIRFLOW_CONN_JRS_DEFAULT", "redis://127.0.0.1:1/0")
    assert main(["stats"]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[1]: line for line in out.splitlines() if line.startswith("│")}
    assert "10 min 00 s" in lines["etl"] and "20 min 00 s" in lines["etl"]
    assert "1 min 30 s" in lines["small"] and "21 min 30 s" in lines["total"]
    assert "since 2024-01-01 00:00:00Z" in out and api in out


def test_stats_json_is_the_routes_answer_and_passes_since_and_dag_id(api, capsys):
    assert main(["stats", "--json", "--since", "2024-02-01", "--dag-id", "small"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc.pop("airflow_url") == api
    assert doc == stats_json(ROWS[3:], since=SINCE, dag_id="small")
    assert Plugin.asked == [{"since": ["2024-02-01T00:00:00Z"], "dag_id": ["small"]}]


def test_stats_refused_or_unreachable_says_what_to_do(api, capsys, monkeypatch):
    assert main(["stats", "--dag-id", "secret"]) == 2
    assert "ask for read access to the DAG" in capsys.readouterr().err
    monkeypatch.setenv("AIRFLOW_JRS_API_URL", "http://127.0.0.1:1")
    assert main(["stats", "--json"]) == 3
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["exit_code"] == 3 and "cannot reach Airflow's API" in error["message"]
