"""Shared fixtures: a private redis-server per session, a fresh namespace per test."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from jrs_testbench.redis_server import EmbeddedRedis
from jrs_testbench.spark_connect import SparkConnectServer


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Redis: ``JRS_TEST_REDIS_URL`` when set, else a private redis-server (append-only)."""
    url = os.environ.get("JRS_TEST_REDIS_URL")
    if url:
        yield url
        return
    with EmbeddedRedis(tmp_path_factory.mktemp("redis")) as server:
        os.environ["JRS_TEST_REDIS_SERVER_PORT"] = str(server.port)
        yield server.url


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real local Redis Cluster (3 primaries, 3 replicas), started once per session when asked for."""
    from jrs_testbench.redis_cluster import EmbeddedRedisCluster

    with EmbeddedRedisCluster(tmp_path_factory.mktemp("redis-cluster")) as cluster:
        yield cluster


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def namespace() -> str:
    """Each test gets its own namespace, so tests never see each other's keys (and never flush)."""
    return f"t-{uuid.uuid4().hex[:12]}"


#: JVM options for the tests' short-lived Spark JVMs (see :func:`_isolate_airflow`).
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def _isolate_airflow() -> None:
    """Point Airflow at a private home before anything imports it (config is read at import)."""
    import tempfile

    if "JRS_TEST_AIRFLOW_HOME" not in os.environ:
        os.environ["JRS_TEST_AIRFLOW_HOME"] = tempfile.mkdtemp(prefix="jrs-airflow-")
    home = os.environ["JRS_TEST_AIRFLOW_HOME"]
    # pytest-xdist's workers inherit the controller's environment, hence its home: two workers
    # would migrate one SQLite file at once (the airflow_db fixture) and share output roots.
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        home = os.path.join(home, worker)
        os.makedirs(home, exist_ok=True)
    os.environ["AIRFLOW_HOME"] = home
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "False")
    # dag.test()'s in-process Execution API and the test's own session write the one SQLite file
    # from two threads (and a test's Airflow processes from others): wait up to 30 s for its lock,
    # as the e2e deployment does (jrs_testbench.deployment.environment), not sqlite3's 5 s, after
    # which the API answers 500 "Database error" on a loaded machine. In the URL, not
    # ``sql_alchemy_connect_args``: child processes need no import, and a deployment on another
    # database inherits nothing of it.
    os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{home}/airflow.db?timeout=30"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = os.path.join(root, "dags")
    bundles = [
        {"name": "dags-folder", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle", "kwargs": {}},
        {
            "name": "test-dags",
            "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
            "kwargs": {"path": os.path.join(root, "tests", "airflow", "dags")},
        },
    ]
    os.environ["AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST"] = json.dumps(bundles)
    os.environ["AIRFLOW__JRS__OUTPUT_ROOT"] = os.path.join(home, "jrs", "output")
    # The tests' Spark applications are tiny and each JVM lives seconds: the JIT's client compiler
    # only and the serial collector cost a spark-submit about 40% less CPU (14.2 -> 8.6 s of user
    # time for tests/spark/apps/tiny_app.py on 2 cores), which a gate that starts hundreds of JVMs
    # on 2 cores spends waiting. Every JVM Spark's scripts start reads these (spark-submit, the
    # pyspark gateway, a Connect server, and the launcher that builds their command); the product
    # sets neither, and a caller's own value wins.
    for name in ("SPARK_SUBMIT_OPTS", "SPARK_LAUNCHER_OPTS"):
        os.environ.setdefault(name, TEST_JVM_OPTIONS)
    os.environ["AIRFLOW__JRS__SPEC_ROOT"] = os.path.join(home, "jrs", "specs")


_isolate_airflow()

#: Folders are tiers (``./dev check`` runs tests/unit and tests/contract, ``./dev test`` every
#: folder): a test in a heavy folder carries its folder's marker, so ``-m`` agrees with the folder.
TIER_FOLDERS = ("spark", "airflow", "chaos", "e2e")
#: pytest-timeout's per-test limit is ``timeout`` in pyproject.toml (a hang fails naming its test);
#: these tiers' tests may take longer (seconds, the largest of a test's markers wins; an explicit
#: ``@pytest.mark.timeout`` wins over all). The limit counts the test's fixtures' setup too: an e2e
#: test that first needs the deployment and its first date builds them (CI, on a day every stage ran
#: twice as slow: 204 s of setup, then a backfill of 396 s, stopped at 600 s).
TIER_TIMEOUTS = {"chaos": 600, "e2e": 900}


#: The heavy tiers' longest files, longest first (``--durations`` of a gate, docs/benchmarks.md "The
#: gate's time"). ``./dev`` runs those tiers with ``--dist loadfile --no-loadscope-reorder``, so a
#: worker takes the files in this order: without it xdist sends the files with the most tests first,
#: and tests/airflow's one-test lineage file (about 6 minutes) came last, one worker idle beside it.
LONGEST_FIRST = (
    "tests/airflow/test_lineage.py",
    "tests/airflow/test_streaming_operator.py",
    "tests/airflow/test_spark_operator.py",
    "tests/airflow/test_ui_views_load.py",
    "tests/airflow/test_standalone_cluster.py",
    "tests/spark/test_streaming.py",
    "tests/spark/test_flights_apps.py",
    "tests/chaos/test_crashes.py",
    "tests/chaos/test_fault_trials.py",
    "tests/chaos/test_other_host.py",
)


def longest_first(rootpath: Path, items: list[pytest.Item]) -> None:
    """Stable: the listed files' tests move to the front in the list's order, the rest keep theirs."""
    rank = {str(rootpath / path): i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(str(item.path), len(rank)))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    longest_first(config.rootpath, items)
    tests = os.path.join(str(config.rootpath), "tests")
    for item in items:
        folder = os.path.relpath(str(item.path), tests).split(os.sep)[0]
        if folder in TIER_FOLDERS and item.get_closest_marker(folder) is None:
            item.add_marker(getattr(pytest.mark, folder))
        if item.get_closest_marker("timeout") is None:
            limits = [limit for marker, limit in TIER_TIMEOUTS.items() if item.get_closest_marker(marker)]
            if limits:
                item.add_marker(pytest.mark.timeout(max(limits)))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--reaches-airflow",
        action="store_true",
        help="collect only the test files that reach Airflow (tests/airflow_reach.py): what "
        "scripts/older_airflow runs on each older Airflow minor",
    )


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With ``--reaches-airflow``, skip the files that run the same code on every Airflow minor
    (not even imported: their collection would cost the older minors' run for nothing)."""
    if not config.getoption("reaches_airflow") or not collection_path.name.startswith("test_"):
        return None
    from airflow_reach import reaches_airflow  # tests/ is on sys.path: this conftest's folder

    return True if collection_path.suffix == ".py" and not reaches_airflow(collection_path) else None


#: What pyspark's ``SparkSession.builder.remote(...)`` leaves in this process's environment.
_CONNECT_ENV = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE")


@pytest.fixture(autouse=True)
def _no_spark_connect_mode_leak() -> Iterator[None]:
    """A Spark Connect test sets ``SPARK_CONNECT_MODE_ENABLED=1`` in the pytest process (pyspark's
    builder does); every spark-submit a later test starts inherits it, and its application's
    ``getOrCreate()`` then fails with CONNECT_URL_NOT_SET. Put the environment back after each test."""
    saved = {key: os.environ.get(key) for key in _CONNECT_ENV}
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkConnectServer]:
    """A Spark Connect server (pyspark's own, ``local[2]``, 512 MB driver) on free ports.

    Started only by the tests that ask for it (tests/spark and tests/airflow share this one),
    stopped at the end of the session whatever the outcome (its whole process group is killed
    if SIGTERM does not end it). Its log is printed with a failing startup; ``server.log_path``
    points at it otherwise.
    """
    server = SparkConnectServer(tmp_path_factory.mktemp("spark-connect"))
    server.start()
    print(f"\nSpark Connect server {server.url} up in {server.startup_seconds:.1f}s (UI {server.ui_url})")
    try:
        yield server
    finally:
        server.stop()
