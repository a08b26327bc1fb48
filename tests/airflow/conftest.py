"""Airflow fixtures: a migrated private metadata DB, jrs and spark connections from the environment."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from airflow_jrs.compat import AIRFLOW_V_3_3_PLUS
from airflow_jrs.store import RedisJobResultStore
from jrs_testbench.helpers import SparkLaunches, connection_env, spark_env

# The test deployments' API servers run on SQLite, which holds a request up to 30 s for its lock
# (SQLITE_CONNECT_ARGS of jrs_testbench/deployment/environment.py): the CLI's calls wait longer
# than that, so that they hear the answer (an older-minor stage on a busy machine, 3 Dec 2026).
os.environ.setdefault("AIRFLOW_JRS_API_TIMEOUT", "90")


@pytest.fixture(scope="session", autouse=True)
def _in_process_api_waits_for_its_lifespan() -> None:
    """Airflow 3.1 and 3.2's ``dag.test()``: make the in-process Execution API usable.

    Their ``InProcessExecutionAPI.transport`` starts the app's lifespan without waiting for it,
    so the first task's request can reach the app before the lifespan has set ``app.state``
    (every task then fails with "'State' object has no attribute 'svcs_registry'"); and the
    lifespan needs ``[api_auth] jwt_secret``. Airflow 3.3 waits, as this does.
    """
    if AIRFLOW_V_3_3_PLUS:
        return
    import asyncio

    os.environ.setdefault("AIRFLOW__API_AUTH__JWT_SECRET", "jrs-tests-in-process-secret")
    # The transport is a slotted attrs cached property: it cannot be replaced on the class. Its
    # one call that starts the lifespan is found by the coroutine's name, and waited for.
    real = asyncio.run_coroutine_threadsafe

    def run_coroutine_threadsafe(coro: Any, loop: Any) -> Any:
        future = real(coro, loop)
        if getattr(coro, "__qualname__", "").endswith("InProcessExecutionAPI.transport.<locals>.start_lifespan"):
            future.result()
        return future

    asyncio.run_coroutine_threadsafe = run_coroutine_threadsafe  # type: ignore[assignment]


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
