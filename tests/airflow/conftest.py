"""Airflow fixtures: a migrated private metadata DB, jrs and spark connections from the environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from airflow_jrs.store import RedisJobResultStore

VENV_BIN = str(Path(sys.executable).parent)
TINY_APP = str(Path(__file__).parents[1] / "spark" / "apps" / "tiny_app.py")


@pytest.fixture(scope="session")
def airflow_db() -> str:
    home = os.environ["AIRFLOW_HOME"]
    if not Path(home, ".migrated").exists():
        proc = subprocess.run(
            [sys.executable, "-m", "airflow", "db", "migrate"], capture_output=True, text=True, env=os.environ
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        Path(home, ".migrated").touch()
    return home


@dataclass
class JrsEnv:
    namespace: str
    store: RedisJobResultStore
    output_root: Path
    event_dir: Path

    def spark_conf(self, **extra: str) -> dict[str, str]:
        """Local-mode conf with event logs on: one event log file per launched application."""
        return {
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": self.event_dir.as_uri(),
            **extra,
        }

    def launches(self) -> int:
        """Spark applications started so far (event log files), the effect we count."""
        return len(list(self.event_dir.iterdir()))


@pytest.fixture
def jrs_env(redis_url: str, namespace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: str) -> JrsEnv:
    monkeypatch.setenv("AIRFLOW_CONN_JRS_DEFAULT", f"{redis_url}?namespace={namespace}")
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_LOCAL", json.dumps({"conn_type": "spark", "host": "local[1]"}))
    monkeypatch.setenv("PATH", f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parents[2]))
    out = tmp_path / "output"
    monkeypatch.setenv("AIRFLOW__JRS__OUTPUT_ROOT", str(out))
    monkeypatch.setenv("AIRFLOW__JRS__SPEC_ROOT", str(tmp_path / "specs"))
    events = tmp_path / "events"
    events.mkdir()
    return JrsEnv(namespace, RedisJobResultStore(redis_url, namespace), out, events)
