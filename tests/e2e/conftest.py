"""One real Airflow deployment for the e2e module: api-server, scheduler, dag-processor, triggerer.

LocalExecutor with 2 slots, SQLite in a temporary AIRFLOW_HOME (``JRS_E2E_SQL_ALCHEMY_CONN``
points it at PostgreSQL instead: the database must exist and will be migrated), the session's
private redis-server, real spark-submit in local mode. Bundles: the project's ``dags/`` (the
flights DAG) and ``tests/e2e/dags``. Started once (about 15 s), stopped at the end whatever
happens, with every process it started.

``./dev test`` runs this tier with ``-n 2 --dist loadgroup``: the tests of this deployment are
one ``xdist_group`` ("deployment", one worker, so one deployment), the browser test's UI site
another, Celery's a third; the groups run side by side. A test that asks for ``e2e`` outside
the group would start a second deployment on the other worker: collection refuses it.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from airflow_jrs.store import RedisJobResultStore
from jrs_testbench.deployment import AirflowClient, LocalDeployment
from jrs_testbench.helpers import SparkLaunches, jrs_env
from jrs_testbench.statsd import StatsdListener

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class E2E:
    airflow: LocalDeployment
    store: RedisJobResultStore
    redis_url: str
    namespace: str
    spark: SparkLaunches
    #: every OpenLineage event the deployment emitted (the openlineage provider's file transport)
    lineage: Path
    #: the StatsD agent the deployment's ``[metrics]`` send to (DogStatsD tags)
    statsd: StatsdListener

    @property
    def client(self) -> AirflowClient:
        return self.airflow.client

    def launches(self) -> int:
        """Spark applications started so far: one event log file each."""
        return self.spark.count()

    def run(self, dag_id: str, run_id: str, timeout: float = 600.0) -> dict:
        """Wait for a run; fail with the task states and the components' logs if it did not succeed."""
        run = self.client.wait_for_run(dag_id, run_id, timeout=timeout)
        states = self.client.task_states(dag_id, run_id)
        assert run["state"] == "success", f"{dag_id}/{run_id}: {states}\n{self.airflow.logs_tail()}"
        return states


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    strays = [
        item.nodeid
        for item in items
        if "e2e" in getattr(item, "fixturenames", ())
        and "deployment" not in {m.args[0] if m.args else "" for m in item.iter_markers("xdist_group")}
    ]
    if strays:
        raise pytest.UsageError(f'mark these pytest.mark.xdist_group("deployment") (one deployment): {strays}')


@pytest.fixture(scope="session")
def e2e(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[E2E]:
    work = tmp_path_factory.mktemp("e2e")
    namespace = f"e2e-{uuid.uuid4().hex[:8]}"
    events = work / "spark-events"
    env = jrs_env(redis_url, namespace, data_dir=work / "data", event_log_dir=events)
    # OpenLineage as a team turns it on: the provider's listener in every process, Spark told
    # its parent task (docs/how-to/lineage.md); events land in one file.
    lineage = work / "lineage" / "events.jsonl"
    lineage.parent.mkdir()
    env["AIRFLOW__OPENLINEAGE__TRANSPORT"] = json.dumps({"type": "file", "log_file_path": str(lineage), "append": True})
    env["AIRFLOW__OPENLINEAGE__SPARK_INJECT_PARENT_JOB_INFO"] = "true"
    # and metrics, as a team would chart them (docs/reference/metrics.md)
    statsd = StatsdListener()
    env.update(statsd.env())
    deployment = LocalDeployment(
        work / "airflow",
        bundles={"dags-folder": ROOT / "dags", "e2e-dags": ROOT / "tests" / "e2e" / "dags"},
        env=env,
        parallelism=2,
        sql_alchemy_conn=os.environ.get("JRS_E2E_SQL_ALCHEMY_CONN") or None,
    )
    store = RedisJobResultStore(redis_url, namespace)
    with deployment:
        yield E2E(deployment, store, redis_url, namespace, SparkLaunches(events), lineage, statsd)
    store.client.close()
    statsd.close()
