"""Checking the store's connection says what the connection page says it does.

``docs/reference/connection.md`` ("Checking it") promises: a ``jrs`` connection (``jrs://`` URL)
passes Airflow's own test with the round trip and the namespace, and ``airflow connections
test`` of it prints "Connection success!"; a ``redis://`` URL has type ``redis``, which the Redis
provider's hook cannot test (the page quotes Airflow's words); ``airflow-jrs doctor
--redis-only`` checks any form and names the namespace. Real Airflow code against a real
redis-server: ``Connection.test_connection`` is what the form's Test button and the CLI call.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.airflow

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "reference" / "connection.md"
BIN = Path(sys.executable).parent


def _url(redis_url: str, scheme: str, namespace: str) -> str:
    return f"{scheme}://{redis_url.split('://', 1)[1]}?namespace={namespace}"


def test_a_jrs_url_passes_airflows_test_with_the_round_trip_and_the_namespace(redis_url, namespace, monkeypatch):
    from airflow.models.connection import Connection

    monkeypatch.setenv("AIRFLOW_CONN_JRS_CHECK", _url(redis_url, "jrs", namespace))
    conn = Connection.get_connection_from_secrets("jrs_check")
    ok, message = conn.test_connection()
    assert conn.conn_type == "jrs"
    assert ok, message
    assert re.fullmatch(rf"PONG in \d+\.\d ms \(namespace '{namespace}'\)", message), message


def test_a_redis_url_cannot_pass_airflows_test_as_the_page_quotes(redis_url, namespace):
    from airflow.models.connection import Connection

    conn = Connection(conn_id="jrs_check", uri=_url(redis_url, "redis", namespace))
    ok, message = conn.test_connection()
    assert conn.conn_type == "redis" and not ok
    assert f'"{message}"' in " ".join(PAGE.read_text(encoding="utf-8").split()), message


def test_the_cli_checks_as_the_page_says(redis_url, namespace, tmp_path):
    """``airflow connections test`` of a ``jrs://`` connection, and ``doctor --redis-only`` of a
    ``redis://`` one, as a reader runs them (a fresh Airflow home, the connection from the
    environment)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        AIRFLOW_HOME=str(tmp_path / "airflow"),
        AIRFLOW__CORE__TEST_CONNECTION="Enabled",
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW_CONN_JRS_CHECK=_url(redis_url, "jrs", namespace),
        AIRFLOW_CONN_JRS_DEFAULT=_url(redis_url, "redis", namespace),
    )
    tested = subprocess.run([str(BIN / "airflow"), "connections", "test", "jrs_check"], env=env, capture_output=True,
                            text=True, timeout=300)  # fmt: skip
    assert tested.returncode == 0, tested.stdout[-2000:] + tested.stderr[-2000:]
    assert "Connection success!" in tested.stdout

    doctor = subprocess.run([str(BIN / "airflow-jrs"), "doctor", "--redis-only"], env=env, capture_output=True,
                            text=True, timeout=300)  # fmt: skip
    out = " ".join(doctor.stdout.split())
    assert doctor.returncode in (0, 1), doctor.stderr[-2000:]  # 1: a check warned (this server's eviction, say)
    assert re.search(rf"PONG in \d+\.\d ms from namespace '{namespace}' on Redis", out), out[-2000:]
