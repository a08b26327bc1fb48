"""Fixtures of the Spark tests: a real Spark Connect server, started once per session on demand."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from jrs_testbench.spark_connect import SparkConnectServer


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkConnectServer]:
    """A Spark Connect server (pyspark's own, ``local[2]``, 512 MB driver) on free ports.

    Started only by the tests that ask for it, stopped at the end of the session whatever the
    outcome (its whole process group is killed if SIGTERM does not end it). Its log is printed
    with a failing startup; ``server.log_path`` points at it otherwise.
    """
    server = SparkConnectServer(tmp_path_factory.mktemp("spark-connect"))
    server.start()
    print(f"\nSpark Connect server {server.url} up in {server.startup_seconds:.1f}s (UI {server.ui_url})")
    try:
        yield server
    finally:
        server.stop()
