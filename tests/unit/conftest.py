"""Fixtures the CLI tests share: the session's real redis-server as a store, and a DAG folder."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from airflow_jrs.store import RedisJobResultStore


@pytest.fixture
def store(redis_url: str, namespace: str) -> Iterator[RedisJobResultStore]:
    """The test's namespace on the session's redis-server (a module may define its own ``store``)."""
    s = RedisJobResultStore(redis_url, namespace)
    yield s
    s.client.close()


@pytest.fixture
def dag_folder(tmp_path: Path) -> Callable[[str, str], str]:
    """``write(name, source)``: a DAG folder holding one file, for Airflow's DagBag to parse."""

    def write(name: str, source: str) -> str:
        folder = tmp_path / "dags"
        folder.mkdir(exist_ok=True)
        (folder / name).write_text(source)
        return str(folder)

    return write
