"""``scripts/airflow_local.py`` stays put between starts of one home.

The redis-server port is chosen once per home and reused (the ``airflow-jrs --redis-url ...``
line it prints is the same at every start), and the home's ``airflow.cfg`` makes ``AIRFLOW_HOME=<home>
airflow ...`` see the deployment's DAG folder without Airflow's example DAGs. The redis tests start
real redis-servers (about 0.1 s each); the config test reads the home's config with Airflow's own
parser in a fresh process with only ``AIRFLOW_HOME`` set, after the ``airflow`` CLI wrote its
default file (3 processes, a few seconds each).
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
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


def _cli_config(home: Path) -> tuple[str, str]:
    """``[core] load_examples`` and ``dags_folder`` as every ``airflow`` command of a reader's shell
    reads them: Airflow's own config parser, only ``AIRFLOW_HOME`` set (one process, not two CLIs)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env["AIRFLOW_HOME"] = str(home)
    code = (
        "from airflow.configuration import conf; "
        "print(conf.get('core', 'load_examples'), conf.get('core', 'dags_folder'))"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    load_examples, dags_folder = done.stdout.strip().splitlines()[-1].split(" ", 1)
    return load_examples, dags_folder


@pytest.mark.airflow
def test_the_cli_of_the_home_sees_our_dags_and_no_examples(airflow_local: ModuleType, tmp_path: Path):
    home, dags = tmp_path / "home", tmp_path / "my-dags"
    dags.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    first = subprocess.run(  # the airflow CLI writes its default airflow.cfg, as the deployment's first start does
        [str(Path(sys.executable).parent / "airflow"), "config", "get-value", "core", "load_examples"],
        env={**env, "AIRFLOW_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert first.stdout.strip() == "True", first.stderr  # Airflow's default: its example DAGs
    cfg = home / "airflow.cfg"
    lines_before = len(cfg.read_text().splitlines())
    airflow_local.write_cli_config(home, dags)
    assert _cli_config(home) == ("False", str(dags))
    assert len(cfg.read_text().splitlines()) == lines_before  # two lines changed, the rest kept

    fresh = tmp_path / "fresh-home"  # no file yet: one with just those settings
    airflow_local.write_cli_config(fresh, dags)
    assert _cli_config(fresh) == ("False", str(dags))
