"""A real Airflow UI with the Job results plugin and a store seeded with every kind of job.

What the browser tests (``tests/airflow/test_ui_views_load.py``, ``tests/e2e/test_ui_browser.py``)
drive and ``scripts/ui_screenshots`` photographs: an ``api-server`` and a ``dag-processor`` (no
scheduler: nothing runs by itself, so what the pages show stays as seeded), the e2e DAG bundle
(``jrs_e2e_triggerer``: two guarded jobs, ``tiny`` and ``tiny2``), runs triggered through the
REST API for the seeded dates (their task instances exist; the runs stay queued), and a private
redis-server seeded through the store's own API:

========== ============================== ==============================
date       tiny                           tiny2
========== ============================== ==============================
06-01      committed                      committed (reused: its XCom says skipped)
06-02      committed                      dirty (cleanup pending)
06-03      FAILED (dirty)                 missing
06-04      committed, forgotten once,     committed
           recovered (a takeover)
06-05      running (lease, intent, beat)  missing
06-06      CANCELED                       STOPPED
06-07      missing (no run)               missing
========== ============================== ==============================

plus ``tiny`` committed from 05-20 to 05-31 (no runs) and one corrupt entry (quarantined on
first read). XComs of 06-01 say what each task handed
downstream (the payload a guarded task returns): ``tiny`` computed, ``tiny2`` reused, each a
result whose Spark application ran 67 s (the Spark time figures: one spent, one avoided).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import redis

from airflow_jrs.domain.identity import application_fingerprint
from airflow_jrs.domain.model import EntryState
from airflow_jrs.domain.payload import result_payload
from airflow_jrs.exceptions import CorruptJobResultError
from airflow_jrs.store import Attempt, JobResult, JobStatus, RedisJobResultStore
from airflow_jrs.store.intents import Intent
from airflow_jrs.store.recoveries import ADOPTED, TOOK_OVER, RecoveryStep
from airflow_jrs.store.redis.heartbeats import RedisHeartbeats
from airflow_jrs.store.redis.intents import RedisIntentStore
from airflow_jrs.store.redis.leases import RedisJobLease
from airflow_jrs.store.redis.recoveries import RedisRecoveries
from jrs_testbench.deployment import LocalDeployment
from jrs_testbench.helpers import ROOT, TINY_APP, jrs_env
from jrs_testbench.redis_server import EmbeddedRedis

DAG = "jrs_e2e_triggerer"
BUNDLE = ROOT / "tests" / "e2e" / "dags"
DATES = [f"2013-06-0{d}" for d in range(1, 8)]
RUN_DATES = DATES[:6]  # 06-07 has no run: "missing" and "Backfill missing dates" have a date
QUARANTINED = f"{DAG}.broken.submit.2013-06-01"


def job_id(task: str, day: str) -> str:
    return f"{DAG}.{task}.submit.{day}"


def run_id(day: str) -> str:
    return f"ui__{day}"


@dataclass
class UiSite:
    url: str
    airflow: LocalDeployment
    store: RedisJobResultStore
    client: redis.Redis
    namespace: str


def _attempt(task: str, day: str) -> Attempt:
    return Attempt(dag_id=DAG, task_id=f"{task}.submit", run_id=run_id(day), try_number=1)


def _fingerprint(task: str, day: str) -> str:
    """``tiny``'s real one (its arguments are literal: the calendar would call another one stale);
    ``tiny2``'s arguments pull XCom, so any will do."""
    if task == "tiny":
        return application_fingerprint(TINY_APP, ["--output", "{jrs_output}", "--rows", "5"], None)
    return uuid.uuid5(uuid.NAMESPACE_URL, f"{task}/{day}").hex


def _result(task: str, day: str, status: JobStatus = JobStatus.SUCCEEDED, **kw: object) -> JobResult:
    start = datetime.fromisoformat(f"{day}T01:00:00+00:00")
    return JobResult(
        job_id=job_id(task, day),
        status=status,
        application_id=f"local-{abs(hash((task, day))) % 10**9:09d}",
        outputs={"output": f"/data/out/{task}/{day}"},
        metrics={"rows": 5, "bytes": 2048},
        fingerprint=_fingerprint(task, day),
        start_time=start,
        end_time=start.replace(minute=1, second=7),
        attempt=_attempt(task, day),
        **kw,  # type: ignore[arg-type]
    )


def seed(store: RedisJobResultStore, client: redis.Redis, spec_root: Path) -> None:
    """The table in the module docstring, through the store's own API."""

    def committed(task: str, day: str) -> None:
        store.create_dirty_result(_result(task, day))
        store.mark_result_as_clean(job_id(task, day))

    for day in range(20, 32):  # an older stretch: a second page of results, a fuller calendar
        committed("tiny", f"2013-05-{day}")
    committed("tiny", "2013-06-01")
    committed("tiny2", "2013-06-01")
    committed("tiny", "2013-06-02")
    store.create_dirty_result(_result("tiny2", "2013-06-02"))
    store.create_dirty_result(
        _result("tiny", "2013-06-03", JobStatus.FAILED, error="Job aborted: stage 2 failed 4 times (FileNotFound)")
    )
    committed("tiny", "2013-06-04")
    store.forget_result(job_id("tiny", "2013-06-04"))
    committed("tiny", "2013-06-04")
    _recovered(store, client, job_id("tiny", "2013-06-04"))
    committed("tiny2", "2013-06-04")
    store.create_dirty_result(_result("tiny", "2013-06-06", JobStatus.CANCELED))
    store.create_dirty_result(_result("tiny2", "2013-06-06", JobStatus.STOPPED))
    # a running stream (its staging is a stream's output folder: the page offers a stream's stop
    # and cancel; a batch job's gets "Cancel job"): lease held, intent recorded
    running = job_id("tiny", "2013-06-05")
    lease = RedisJobLease(
        client, store.namespace, running, ttl=3600,
        owner={"host": "worker-1", "pid": 4242, "dag_id": DAG, "task_id": "tiny.submit",
               "run_id": run_id("2013-06-05"), "try_number": 1},
    )  # fmt: skip
    fence = lease.acquire()
    intents = RedisIntentStore(client, store.namespace, str(spec_root))
    intents.record(
        Intent(
            job_id=running, fence=fence, spec_uri=intents.spec_uri(running, fence),
            staging="/data/staging/stream/output", app_name="jrs-tiny", host="worker-1", pid=4242, started_at=1.0,
        ),
        {"application": "tiny.py"},
    )  # fmt: skip
    # its supervisor's heartbeat: a stop or cancel from the page has someone to relay it
    RedisHeartbeats(client, store.namespace).beat(
        running, fence, 3_600_000, host="worker-1", pid=4242, child=4243, first=True
    )
    # a corrupt entry, quarantined on first read
    client.set(store.keys.result(QUARANTINED), b"{not json")
    try:
        store.get_entry(QUARANTINED)
    except CorruptJobResultError:
        pass


def _recovered(store: RedisJobResultStore, client: redis.Redis, job: str) -> None:
    """Try 1 of the job's task died after its Spark application finished; try 2 took over its
    lease and adopted the output (the recovery log, as a successor writes it)."""
    owner = {"dag_id": DAG, "task_id": "tiny.submit", "run_id": run_id("2013-06-04")}
    dead = RedisJobLease(client, store.namespace, job, ttl=60, owner={**owner, "try_number": 1})
    first = dead.acquire()
    dead.release()  # (a real death lets the lease expire; the log is the same)
    successor = RedisJobLease(client, store.namespace, job, ttl=60, owner={**owner, "try_number": 2})
    second = successor.acquire()
    facts = {**owner, "try_number": 1}
    log = RedisRecoveries(client, store.namespace)
    for event, text in (
        (TOOK_OVER, f"took over the lease from fence {int(first)} (expired: its worker was lost)"),
        (ADOPTED, f"adopted the finished output of fence {int(first)} (application local-1700000004)"),
    ):
        log.record(job, second, RecoveryStep(event, text, predecessor=int(first), facts=facts))
    successor.release()


def _xcom(airflow: LocalDeployment, day: str, task: str, value: dict[str, object]) -> None:
    path = f"/api/v2/dags/{DAG}/dagRuns/{run_id(day)}/taskInstances/{task}.submit/xcomEntries"
    airflow.client.request("POST", path, {"key": "return_value", "value": value})


@contextmanager
def ui_site(home: Path, *, env: Mapping[str, str] | None = None, base_path: str = "") -> Iterator[UiSite]:
    """Start it all in ``home`` (redis data, Airflow home); stop it all on exit. ``base_path``
    (``/airflow``) serves Airflow under that sub-path of its ``[api] base_url``."""
    namespace = f"ui-{uuid.uuid4().hex[:8]}"
    with EmbeddedRedis(home / "redis") as server:
        url = f"redis://127.0.0.1:{server.port}/0"
        client = redis.Redis.from_url(url)
        store = RedisJobResultStore(client, namespace)
        seed(store, client, home / "specs")
        deployment_env = {
            **jrs_env(url, namespace, data_dir=home / "data"),
            "AIRFLOW__JRS__SPARK_UI_URL": "http://history.example:18080/history/{application_id}/jobs/",
            **(env or {}),
        }
        airflow = LocalDeployment(
            home / "airflow",
            bundles={"e2e": BUNDLE},
            components=("api-server", "dag-processor"),
            env=deployment_env,
            base_path=base_path,
        )
        with airflow:
            airflow.wait_for_dag(DAG)
            for day in RUN_DATES:
                airflow.client.trigger(DAG, f"{day}T00:00:00+00:00", run_id=run_id(day))
            for task, reused in (("tiny", False), ("tiny2", True)):
                payload = result_payload(_result(task, "2013-06-01"), EntryState.CLEAN, skipped=reused)
                _xcom(airflow, "2013-06-01", task, payload)
            try:
                yield UiSite(airflow.url, airflow, store, client, namespace)
            finally:
                client.close()
