"""End to end on CeleryExecutor: two Celery workers on "hosts" of their own, Spark on a real
standalone cluster (a master and two workers, client deploy mode).

One :class:`~jrs_testbench.deployment.celery.CeleryDeployment` for the module: api-server,
scheduler, dag-processor, triggerer, a Celery broker (its own redis-server), PostgreSQL as
metadata database and result backend (a database created and dropped here), and two workers,
``worker-a`` and ``worker-b``, each in its own UTS/PID namespace, concurrency 1. The store is
a redis-server of this module alone, so its command statistics are ours to read.

"Spark did not run" is counted twice: Spark event logs (one file per application) and the
master's application list.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest
import redis

from airflow_jrs.domain.identity import application_fingerprint
from airflow_jrs.store import JobResult, JobStatus, RedisJobResultStore
from airflow_jrs.store.redis.keys import KeySpace
from jrs_testbench.deployment.celery import CeleryDeployment
from jrs_testbench.helpers import TINY_APP, SparkLaunches, jrs_env
from jrs_testbench.redis_server import EmbeddedRedis
from jrs_testbench.spark_cluster import SparkStandaloneCluster

pytestmark = [
    pytest.mark.airflow,
    pytest.mark.e2e,
    pytest.mark.spark,
    pytest.mark.cluster,
    pytest.mark.xdist_group("celery"),
]

ROOT = Path(__file__).resolve().parents[2]
DAG_ID = "jrs_celery_takeover"
SUBMIT = "slow.submit"
TASKS = ("slow.submit", "slow.cleanup")
#: tests/e2e/celery_dags/jrs_celery_dags.py's TAKEOVER_ARGS (the fingerprint is computed from them).
TAKEOVER_ARGS = ["--output", "{jrs_output}", "--rows", "5", "--sleep", "20"]
WORKERS = ("worker-a", "worker-b")
#: Commands that change a Redis server's data, beside those flagged ``write``: our state
#: transitions are Lua scripts, and every create/clean publishes a notification.
SCRIPT_OR_NOTIFY = frozenset({"eval", "evalsha", "fcall", "publish", "spublish"})


def job_id(day: str) -> str:
    return f"{DAG_ID}.{SUBMIT}.{day}"


@dataclass
class Celery:
    airflow: CeleryDeployment
    spark: SparkStandaloneCluster
    store: RedisJobResultStore
    store_server: EmbeddedRedis
    launches: SparkLaunches

    @property
    def client(self):
        return self.airflow.client

    def master_apps(self) -> dict[str, dict[str, Any]]:
        status = self.spark.status()
        return {a["id"]: a for a in status.get("activeapps", []) + status.get("completedapps", [])}


if not CeleryDeployment.available():
    pytest.skip("needs root and unshare(1) to give Celery workers hosts of their own", allow_module_level=True)


@pytest.fixture(scope="module")
def celery(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Celery]:
    work = tmp_path_factory.mktemp("celery")
    namespace = f"celery-{uuid.uuid4().hex[:8]}"
    with (
        EmbeddedRedis(work / "store-redis") as store_server,
        SparkStandaloneCluster(work / "spark", worker_memory="1g") as spark,
    ):
        launches = SparkLaunches(work / "spark-events")
        env = {
            **jrs_env(store_server.url, namespace, data_dir=work / "data", event_log_dir=launches.dir),
            "AIRFLOW_CONN_SPARK_STANDALONE": spark.connection(),
            # A dead worker's lease frees in seconds (Airflow notices the dead task in ~20 s).
            "AIRFLOW__JRS__LEASE_TTL": "10",
            "AIRFLOW__JRS__READ_TIMEOUT": "3",
        }
        deployment = CeleryDeployment(
            work / "airflow",
            bundles={"celery-dags": ROOT / "tests" / "e2e" / "celery_dags"},
            env=env,
            workers=WORKERS,
        )
        store = RedisJobResultStore(store_server.url, namespace)
        with deployment:
            deployment.wait_for_dag(DAG_ID)
            deployment.client.unpause(DAG_ID)
            yield Celery(deployment, spark, store, store_server, launches)
        store.client.close()


def _precommit(store: RedisJobResultStore, days: list[str]) -> None:
    """Committed results with the job ids and fingerprints the DAG computes, written as a tool would."""
    fp = application_fingerprint(TINY_APP, TAKEOVER_ARGS, None)
    for day in days:
        result = JobResult(
            job_id=job_id(day), status=JobStatus.SUCCEEDED, outputs={"output": f"/precommitted/{day}"}, fingerprint=fp
        )
        store.create_dirty_result(result)
        store.mark_result_as_clean(job_id(day))


def _snapshot(client: redis.Redis, namespace: str) -> dict[bytes, bytes | None]:
    """Every key of the namespace with its serialized value and TTL state."""
    keys = sorted(client.scan_iter(match=f"{KeySpace(namespace).base}:*", count=1000))
    return {key: client.dump(key) for key in keys}


def _commands(client: redis.Redis) -> dict[str, int]:
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in client.info("commandstats").items()}


def _writes(client: redis.Redis, commands: dict[str, int]) -> dict[str, int]:
    """The commands of ``commands`` that change data: flagged ``write`` by the server, or ours."""
    table = client.command()
    writes = {}
    for name, calls in commands.items():
        flags = table.get(name.split("|", 1)[0], {}).get("flags", [])
        if "write" in flags or name in SCRIPT_OR_NOTIFY:
            writes[name] = calls
    return writes


def test_backfill_of_committed_dates_on_celery_starts_no_spark_and_only_reads_the_store(celery):
    days = ["2013-02-01", "2013-02-02", "2013-02-03"]
    _precommit(celery.store, days)
    client = redis.Redis.from_url(celery.store_server.url)
    try:
        before = _snapshot(client, celery.store.namespace)
        apps_before = set(celery.master_apps())
        launches_before = celery.launches.count()
        client.config_resetstat()
        result = celery.airflow.backfills.run(DAG_ID, days[0], days[-1], "none", max_active_runs=2, via="rest")
        commands = _commands(client)
        after = _snapshot(client, celery.store.namespace)
        assert result.runs == dict.fromkeys(days, "success"), f"{result}\n{celery.airflow.logs_tail()}"
        assert all(states == dict.fromkeys(TASKS, "success") for states in result.tasks.values()), result.tasks
        assert celery.launches.count() == launches_before, "Spark started for committed jobs"
        assert set(celery.master_apps()) == apps_before, "the skip path reached the cluster"
        for rid in result.run_ids.values():
            assert celery.client.xcom(DAG_ID, rid, SUBMIT)["skipped"] is True
        # The tasks ran on the Celery workers (their own hostnames), and did nothing but read.
        hosts = {ti["hostname"] for rid in result.run_ids.values() for ti in celery.client.task_instances(DAG_ID, rid)}
        assert hosts and hosts <= set(WORKERS), hosts
        assert after == before, "the store changed"
        writes = _writes(client, commands)
        assert writes == {}, f"a committed backfill wrote to the store: {writes} (all commands: {commands})"
        assert commands.get("get", 0) + commands.get("mget", 0) > 0, commands  # the entries were read
        print(f"\n[celery committed backfill] store commands: {commands}")
    finally:
        client.close()


@dataclass
class MasterSampler:
    """Samples the master's application list every ``interval`` seconds in a thread."""

    cluster: SparkStandaloneCluster
    interval: float = 1.0
    samples: list[tuple[float, list[tuple[str, str, str]]]] = field(default_factory=list)
    errors: int = 0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="master-sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                active = [(a["id"], a["name"], a["state"]) for a in self.cluster.active_applications()]
                self.samples.append((time.time(), active))
            except OSError:
                self.errors += 1
            self._stop.wait(self.interval)

    def __enter__(self) -> MasterSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def max_running_at_once(self) -> int:
        return max((len(active) for _, active in self.samples), default=0)


def _wait(predicate, timeout: float, what: str, check=None) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if check is not None:
            check()
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)
    return value


def test_sigkilled_celery_worker_task_is_retried_on_the_other_worker_and_the_job_runs_once(celery):
    day = "2013-01-01"
    job = job_id(day)
    keys = KeySpace(celery.store.namespace)
    raw = celery.store.client
    launches_before = celery.launches.count()
    apps_before = set(celery.master_apps())
    with MasterSampler(celery.spark) as sampler:
        run_id = celery.client.trigger(DAG_ID, day)["dag_run_id"]

        def running_on_master():
            ti = {t["task_id"]: t for t in celery.client.task_instances(DAG_ID, run_id)}.get(SUBMIT)
            apps = [a for a in celery.spark.active_applications() if a["id"] not in apps_before]
            if ti and ti["state"] == "running" and ti["hostname"] and apps and apps[0]["state"] == "RUNNING":
                return ti["hostname"], apps[0]["id"]
            return None

        victim, first_app = _wait(running_on_master, 300, "the task to run Spark on the cluster", check=None)
        assert victim in WORKERS
        first_fence = int(raw.hget(keys.lease(job), "token") or 0)
        assert first_fence >= 1
        time.sleep(2)  # well inside the application's 20 s of work
        inside = [psutil.Process(pid) for pid in celery.airflow.worker_pids(victim)]
        assert len(inside) >= 3  # at least the worker, its pool process and the task's processes
        died = celery.airflow.kill_worker(victim)
        psutil.wait_procs(inside, timeout=30)
        assert not [p for p in inside if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]

        def successor_holds_lease():
            return int(raw.hget(keys.lease(job), "token") or 0) > first_fence

        _wait(successor_holds_lease, 300, "a successor to take the lease", check=celery.airflow.check_alive)
        took_lease = time.time()
        run = celery.client.wait_for_run(DAG_ID, run_id, timeout=600)
        entry = celery.store.get_entry(job)
        done = time.time()
        time.sleep(2)  # two more samples after the end
    survivor = next(w for w in WORKERS if w != victim)
    print(
        f"\n[celery takeover] killed {victim}; lease taken {took_lease - died:.1f}s after the kill, "
        f"run done {done - died:.1f}s after; {len(sampler.samples)} master samples"
    )
    states = celery.client.task_states(DAG_ID, run_id)
    assert run["state"] == "success", f"{states}\n{celery.airflow.logs_tail()}"
    tis = {t["task_id"]: t for t in celery.client.task_instances(DAG_ID, run_id)}
    assert tis[SUBMIT]["try_number"] >= 2
    assert tis[SUBMIT]["hostname"] == survivor  # retried on the other worker
    # Exactly one SUCCEEDED result, no earlier one in the history.
    assert entry is not None and entry.result.status is JobStatus.SUCCEEDED and entry.is_clean
    assert entry.result.fence is not None and entry.result.fence > first_fence
    assert not [h for h in celery.store.get_history(job) if h.result.status is JobStatus.SUCCEEDED]
    # The killed attempt's application died with its driver; the successor's produced the result.
    new_apps = {k: v for k, v in celery.master_apps().items() if k not in apps_before}
    assert first_app in new_apps and entry.result.application_id in new_apps
    assert entry.result.application_id != first_app
    assert len(new_apps) == 2, new_apps
    assert celery.launches.count() - launches_before == 2
    # Sampled every second through the test: never two applications running at once.
    assert sampler.samples and sampler.max_running_at_once() <= 1, [s for s in sampler.samples if len(s[1]) > 1]
    assert any(first_app in {a[0] for a in s[1]} for s in sampler.samples)
    assert any(entry.result.application_id in {a[0] for a in s[1]} for s in sampler.samples)
