"""The local deployment (``scripts/airflow_local.py``, the e2e tests' Airflow) before it starts:
its ports, and what every DAG it runs gets. No Airflow process is started here."""

from __future__ import annotations

import http.server
import json
import logging
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from jrs_testbench.deployment import DeploymentError, LocalDeployment
from jrs_testbench.deployment.rest import AirflowClient, ApiError
from jrs_testbench.helpers import ROOT, free_port


class Holder(int):
    """A taken port and the pid of the process that holds it."""

    pid: int


@pytest.fixture
def taken_port() -> Iterator[Holder]:
    """A port a child python process listens on, so its pid and command line are known (the test
    process's own command line is pytest-xdist's title under ``./dev check``, naming this test)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD], stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL
    )
    try:
        assert holder.stdout is not None
        port = Holder(int(holder.stdout.readline()))
        port.pid = holder.pid
        yield port
    finally:
        holder.kill()
        holder.wait()


_HOLD = (
    "import socket, sys, time\n"
    "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
    "print(s.getsockname()[1], flush=True)\n"
    "time.sleep(600)\n"
)


def test_a_taken_api_port_is_named_with_the_process_that_holds_it(tmp_path: Path, taken_port: Holder):
    deployment = LocalDeployment(tmp_path / "home", api_port=taken_port, components=("api-server",))
    with pytest.raises(DeploymentError) as caught:
        deployment.check_ports()
    text = str(caught.value)
    assert f"port {taken_port}" in text and "API server" in text
    assert f"pid {taken_port.pid}" in text and "python" in text  # who holds it
    assert "--port" in text  # what to do


def test_the_api_port_may_not_be_a_log_server_port(tmp_path: Path):
    port = free_port()
    env = {"AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(port)}
    deployment = LocalDeployment(tmp_path / "home", api_port=port, env=env)
    with pytest.raises(DeploymentError, match=rf"port {port} .*twice.*log server"):
        deployment.check_ports()


def test_log_servers_get_free_ports_so_deployments_never_collide(tmp_path: Path):
    # Airflow's defaults (8793, 8794) would be shared by every deployment on the machine.
    one = LocalDeployment(tmp_path / "one")
    two = LocalDeployment(tmp_path / "two")
    ports = [
        int(d.env[f"AIRFLOW__LOGGING__{kind}_LOG_SERVER_PORT"]) for d in (one, two) for kind in ("WORKER", "TRIGGER")
    ]
    assert len(set(ports)) == 4 and not {8793, 8794} & set(ports)
    one.check_ports()  # all free: no error


def test_airflow_local_says_which_port_is_taken_instead_of_restarting_the_api_server(
    tmp_path: Path, taken_port: Holder
):
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "airflow_local.py"), "--port", str(taken_port),
         "--redis-url", "redis://127.0.0.1:1/0", "--home", str(tmp_path / "home")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"port {taken_port}" in done.stderr and f"pid {taken_port.pid}" in done.stderr
    assert "Traceback" not in done.stderr and "restarting" not in done.stderr


@pytest.mark.parametrize("script", ["demo.py", "airflow_local.py"])
def test_the_demo_connection_has_no_value_too_short_to_mask(script: str):
    # Airflow hands every connection extra to its secrets masker when a task reads the
    # connection; a value under [logging] min_length_masked_secret (5) made every task log
    # "Skipping masking for a secret as it's too short". The demo's namespace was "demo".
    import importlib.util
    import json

    from airflow.models.connection import Connection
    from airflow.sdk._shared.secrets_masker import secrets_masker
    from airflow.sdk._shared.secrets_masker.secrets_masker import SecretsMasker

    from jrs_testbench.helpers import jrs_env

    spec = importlib.util.spec_from_file_location(f"_script_{script[:-3]}", ROOT / "scripts" / script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    namespace = getattr(module, "NAMESPACE", None) or module.DEFAULT_NAMESPACE
    env = jrs_env("redis://127.0.0.1:6379/0", namespace, data_dir="/tmp/unused")
    warned: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: warned.append(record.getMessage())  # type: ignore[method-assign]
    secrets_masker.log.addHandler(handler)
    SecretsMasker._has_warned_short_secret = False
    try:
        for name in ("AIRFLOW_CONN_JRS_DEFAULT", "AIRFLOW_CONN_SPARK_LOCAL"):
            value = env[name]
            conn = Connection.from_json(value, conn_id="c") if value.startswith("{") else Connection(uri=value)
            masker = SecretsMasker()
            masker.add_mask(conn.password)
            masker.add_mask(json.loads(conn.extra or "{}"))
    finally:
        secrets_masker.log.removeHandler(handler)
    assert not [w for w in warned if "too short" in w], f"{script}: namespace {namespace!r}"


class _Airflow33(http.server.BaseHTTPRequestHandler):
    """Answers as Airflow 3.3's API does with ``expose_stacktrace`` on: a token, then each queued
    (status, orig_error) for ``/api/v2/dags/d``, then 200."""

    answers: list[tuple[int, str]] = []
    calls = 0

    def do_POST(self) -> None:
        self._send(200, {"access_token": "t"})

    def do_GET(self) -> None:
        type(self).calls += 1
        if self.answers:
            status, orig = self.answers.pop(0)
            self._send(status, {"detail": {"reason": "Database error", "orig_error": orig, "message": "..."}})
        else:
            self._send(200, {"dag_id": "d"})

    def _send(self, status: int, doc: dict[str, object]) -> None:
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def airflow_api() -> Iterator[str]:
    _Airflow33.answers, _Airflow33.calls = [], 0
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Airflow33)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_client_retries_sqlites_lock_and_says_so(airflow_api: str, capsys: pytest.CaptureFixture[str]):
    # WAL's read-to-write upgrade fails at once, past any busy timeout: 3.3 answers 500, older 503
    _Airflow33.answers = [(500, "(sqlite3.OperationalError) database is locked"), (503, "database is locked")]
    assert AirflowClient(airflow_api, "admin", "pw").dag("d") == {"dag_id": "d"}
    assert _Airflow33.calls == 3
    assert capsys.readouterr().err.count("SQLite locked, retry") == 2


def test_the_client_raises_any_other_database_error_at_once(airflow_api: str):
    _Airflow33.answers = [(500, "(sqlite3.IntegrityError) NOT NULL constraint failed: dag_run.run_id")]
    with pytest.raises(ApiError) as caught:
        AirflowClient(airflow_api, "admin", "pw").dag("d")
    assert caught.value.status == 500 and "NOT NULL constraint" in str(caught.value)
    assert _Airflow33.calls == 1
