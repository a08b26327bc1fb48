"""``scripts/airflow_local.py`` stays put between starts of one home.

The redis-server port is chosen once per home and reused (the ``airflow-jrs --redis-url ...``
line it prints is the same at every start). These tests start real redis-servers (about 0.1 s
each); the home's ``airflow.cfg`` (three Airflow processes) is checked in the airflow tier:
tests/airflow/test_airflow_local_cli_config.py.
"""

from __future__ import annotations

import importlib.util
import os
import socket
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def airflow_local() -> ModuleType:
    spec = importlib.util.spec_from_file_location("airflow_local", ROOT / "scripts" / "airflow_local.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_redis_port_is_chosen_once_per_home(airflow_local: ModuleType, tmp_path: Path):
    home = tmp_path / "home"
    first = airflow_local.start_redis(home, tmp_path / "redis")
    try:
        port = first.port
    finally:
        first.stop()
    assert (home / airflow_local.REDIS_PORT_FILE).read_text().strip() == str(port)
    again = airflow_local.start_redis(home, tmp_path / "redis")
    try:
        assert again.port == port  # the printed --redis-url still works
    finally:
        again.stop()
    other = airflow_local.kept_redis_port(tmp_path / "other-home")
    assert (tmp_path / "other-home" / airflow_local.REDIS_PORT_FILE).read_text().strip() == str(other)


def test_an_unreadable_kept_port_is_replaced(airflow_local: ModuleType, tmp_path: Path):
    (tmp_path / airflow_local.REDIS_PORT_FILE).write_text("not a port\n")
    port = airflow_local.kept_redis_port(tmp_path)
    assert 0 < port < 65536 and (tmp_path / airflow_local.REDIS_PORT_FILE).read_text().strip() == str(port)


def test_a_taken_kept_port_is_named_with_its_holder_and_what_to_do(airflow_local: ModuleType, tmp_path: Path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        (tmp_path / airflow_local.REDIS_PORT_FILE).write_text(f"{port}\n")
        with pytest.raises(SystemExit) as caught:
            airflow_local.start_redis(tmp_path, tmp_path / "redis")
    text = str(caught.value)
    assert f"port {port}" in text and f"pid {os.getpid()}" in text
    assert airflow_local.REDIS_PORT_FILE in text and "delete" in text
