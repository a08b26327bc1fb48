"""Airflow fixtures: a migrated private metadata DB, jrs and spark connections from the environment."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from airflow_jrs.store import RedisJobResultStore
from jrs_testbench.helpers import SparkLaunches, connection_env, spark_env


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
    spark: SparkLaunches

    def spark_conf(self, **extra: str) -> dict[str, str]:
        """Local-mode conf with event logs on: one event log file per launched application."""
        return {**self.spark.conf({"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}), **extra}

    def launches(self) -> int:
        """Spark applications started so far (event log files), the effect we count."""
        return self.spark.count()


@pytest.fixture
def jrs_env(redis_url: str, namespace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: str) -> JrsEnv:
    env = {**connection_env(redis_url, namespace, data_dir=tmp_path), **spark_env("local[1]")}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    store = RedisJobResultStore(redis_url, namespace)
    return JrsEnv(namespace, store, Path(env["AIRFLOW__JRS__OUTPUT_ROOT"]), SparkLaunches(tmp_path / "events"))
