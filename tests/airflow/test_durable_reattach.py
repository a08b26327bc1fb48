"""``durable=True`` (the parent's ResumableJobMixin, Airflow 3.3) under the guard, through the real
operator (dag.test), real Redis, real folders, the real Spark provider hook and supervisor and
Airflow's real task state store; only the standalone cluster is a stand-in
(:mod:`jrs_testbench.fake_standalone`: standalone cluster mode runs no PySpark).

Each run's first try ends while its driver runs: the master reports the driver's state as
UNKNOWN ("in failure recovery"), which ends the provider's status polling with an error while the
master still lists the driver as live. What happens before the retry is arranged at the retry's
first step under the lease (:func:`airflow_jrs.protocol.steps.observe_steps`), so nothing races.
"Spark was not submitted again" is counted on the master: one driver per submission.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import re
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import test_cluster_deploy_mode

from airflow_jrs.operators import JrsSparkSubmitOperator
from airflow_jrs.protocol.steps import observe_steps
from airflow_jrs.spark.commit import marker_path
from airflow_jrs.store import JobStatus
from airflow_jrs.store.intents import IntentStore
from airflow_jrs.store.redis.intents import RedisIntentStore
from jrs_testbench.fake_standalone import FakeStandaloneMaster
from jrs_testbench.helpers import free_port

pytestmark = [pytest.mark.airflow, pytest.mark.cluster]

JOB = "jrs_durable.submit"
DAG_FILE = Path(__file__).parent / "dags" / "jrs_durable_dags.py"
DAY_1, DAY_2 = datetime(2013, 1, 1, tzinfo=UTC), datetime(2013, 1, 2, tzinfo=UTC)
_counter = itertools.count()


def run_dag(logical_date: datetime = DAY_1) -> dict[str, str | None]:
    """dag.test() one run (tries included: retry_delay is 0), the DAG parsed again."""
    spec = importlib.util.spec_from_file_location(f"jrs_durable_dags_{next(_counter)}", DAG_FILE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    run = module.dag.test(logical_date=logical_date)
    return {ti.task_id: (str(ti.state) if ti.state else None) for ti in run.get_task_instances()}


def state_store_id() -> object:
    """What the parent persisted in the task state store of the run (its ``external_id_key``)."""
    from airflow.models.task_state_store import TaskStateStoreModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.scalars(
            select(TaskStateStoreModel).where(
                TaskStateStoreModel.dag_id == "jrs_durable",
                TaskStateStoreModel.key == JrsSparkSubmitOperator.external_id_key,
            )
        ).all()
        return json.loads(rows[0].value) if rows else None


def finish(fake: FakeStandaloneMaster, driver_id: str, *, marker: bool = True) -> None:
    """The driver writes its data and, unless told not to, its commit marker last; then it ends."""
    conf = fake.drivers[driver_id]["conf"]
    out = Path(conf["spark.jrs.output_dir"])
    (out / "data").mkdir(parents=True, exist_ok=True)
    (out / "data" / "part-0").write_text("42\n")
    if marker:
        doc = {"v": 1, "application_id": "app-20130101000000-0000", "job_id": conf["spark.jrs.job_id"],
               "fence": int(conf["spark.jrs.fence"]), "metrics": {"rows": 1},
               "written_at": datetime.now(UTC).isoformat()}  # fmt: skip
        Path(marker_path(str(out))).write_text(json.dumps(doc))
    fake.set_state(driver_id, "FINISHED")


def output_of(fake: FakeStandaloneMaster, driver_id: str) -> str:
    return str(fake.drivers[driver_id]["conf"]["spark.jrs.output_dir"])


@pytest.fixture
def retry_step() -> Iterator[Callable[[Callable[[], None]], None]]:
    """``retry_step(action)``: run ``action`` when the second try holds the lease, before it recovers."""
    seen = itertools.count(1)
    actions: list[Callable[[], None]] = []

    def observer(step: str) -> None:
        if step == "after_lease" and next(seen) == 2:
            for action in actions:
                action()

    observe_steps(observer)
    yield actions.append
    observe_steps(None)


def finish_when_polled(fake: FakeStandaloneMaster, driver_id: str, after: int, polls: int = 1) -> threading.Thread:
    """Finish ``driver_id`` (with its marker) once the master answered ``polls`` listings of its drivers
    after request ``after`` (the condition shares the server's lock: each answer went out before)."""

    def run() -> None:
        with fake.asked:
            fake.asked.wait_for(lambda: sum(r.startswith("GET /json") for r in fake.requests[after:]) >= polls, 120)
        finish(fake, driver_id)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


master = test_cluster_deploy_mode.master  # the fixture: a fake standalone master, spark-submit on PATH


@pytest.fixture
def fake(master, monkeypatch):
    monkeypatch.setenv("JRS_TEST_RETRIES", "1")
    monkeypatch.delenv("JRS_TEST_DURABLE", raising=False)  # the parent's default: durable on Airflow 3.3
    master.state_on_submit = "UNKNOWN"  # the first try's polling ends while the driver is live
    return master


def intents(jrs_env) -> IntentStore:
    return RedisIntentStore(jrs_env.store.client, jrs_env.store.namespace, "/unused")


def test_a_retry_reattaches_to_the_running_driver_and_adopts_it_without_a_second_submission(jrs_env, fake, retry_step):
    helpers: list[threading.Thread] = []
    persisted: list[object] = []

    def before_the_retry_recovers() -> None:
        persisted.append(state_store_id())
        helpers.append(finish_when_polled(fake, fake.submissions[0], len(fake.requests)))

    retry_step(before_the_retry_recovers)
    states = run_dag()
    assert states["submit"] == "success", states
    assert fake.submissions == ["driver-20130101000000-0000"], "a second driver was submitted"
    assert persisted == [fake.submissions[0]]  # the parent persisted the id the first try submitted
    entry = jrs_env.store.get_entry(JOB)
    assert entry is not None and entry.result.status is JobStatus.SUCCEEDED
    assert entry.result.outputs == {"output": output_of(fake, fake.submissions[0])}
    assert intents(jrs_env).get(JOB) is None


@pytest.mark.parametrize("durable", [True, False])
def test_the_state_stores_id_finds_a_driver_the_intent_never_recorded(jrs_env, fake, retry_step, monkeypatch, durable):
    # The first try died after the parent persisted the driver id and before the intent was amended
    # with it. With durable the retry finds that driver by the state store's id, waits for it and
    # adopts its output. Without, the standalone master's live driver is unaccounted for: the retry
    # refuses to submit beside it (and the driver ends only after the master answered that).
    monkeypatch.setenv("JRS_TEST_DURABLE", json.dumps(durable))
    store = jrs_env.store

    def forget_the_id_in_the_intent() -> None:
        key = store.keys.intent(JOB)
        doc = json.loads(store.client.get(key))
        store.client.set(key, json.dumps({**doc, "application_id": None}), keepttl=True)
        helpers.append(finish_when_polled(fake, fake.submissions[0], len(fake.requests), polls=2))

    helpers: list[threading.Thread] = []
    retry_step(forget_the_id_in_the_intent)
    states = run_dag()
    assert len(fake.submissions) == 1, "a second driver was submitted beside the unrecorded one"
    entry = store.get_entry(JOB)
    if not durable:
        assert states["submit"] == "failed", states
        assert entry is None or entry.result.status is not JobStatus.SUCCEEDED
        return
    assert states["submit"] == "success", states
    assert entry is not None and entry.result.status is JobStatus.SUCCEEDED
    assert entry.result.outputs == {"output": output_of(fake, fake.submissions[0])}


def test_a_driver_that_succeeded_before_the_retry_is_adopted_not_resubmitted(jrs_env, fake, retry_step):
    retry_step(lambda: finish(fake, fake.submissions[0]))
    states = run_dag()
    assert states["submit"] == "success", states
    assert len(fake.submissions) == 1
    entry = jrs_env.store.get_entry(JOB)
    assert entry is not None and entry.result.outputs == {"output": output_of(fake, fake.submissions[0])}


def test_a_driver_that_finished_without_its_commit_marker_is_submitted_again_not_reattached(jrs_env, fake, retry_step):
    # The master says FINISHED, which the parent's reattach takes for "already succeeded"; the store
    # says the job is not done (no commit marker under that fence). The retry submits a new driver,
    # and its new fence's folder is published only once that driver committed it.

    def first_driver_finished_without_marker() -> None:
        finish(fake, fake.submissions[0], marker=False)
        fake.state_on_submit = "RUNNING"

        def second_driver_commits() -> None:
            def polled() -> bool:  # the provider polls the second driver's status
                return len(fake.submissions) == 2 and f"GET /v1/submissions/status/{fake.submissions[1]}" in (
                    fake.requests
                )

            with fake.asked:
                fake.asked.wait_for(polled, 120)
            persisted.append(state_store_id())
            finish(fake, fake.submissions[1])

        threading.Thread(target=second_driver_commits, daemon=True).start()

    persisted: list[object] = []
    retry_step(first_driver_finished_without_marker)
    states = run_dag()
    assert states["submit"] == "success", states
    assert len(fake.submissions) == 2, fake.submissions
    assert persisted == [fake.submissions[1]]  # the parent submitted and persisted anew: no reattach
    entry = jrs_env.store.get_entry(JOB)
    assert entry is not None and entry.result.outputs == {"output": output_of(fake, fake.submissions[1])}
    assert output_of(fake, fake.submissions[1]) != output_of(fake, fake.submissions[0])


def test_another_run_of_the_job_finds_the_intent_and_adopts_where_the_state_store_starts_over(
    jrs_env, fake, monkeypatch
):
    # Airflow: "retries resume, clearing starts over" (a new run has an empty task state store).
    # The job's store is the authority across runs: the second run waits for the first run's
    # driver and adopts its output.
    monkeypatch.setenv("JRS_TEST_RETRIES", "0")
    states = run_dag(DAY_1)
    assert states["submit"] == "failed", states  # the last try, the driver still runs: the intent stays
    stale = intents(jrs_env).get(JOB)
    assert stale is not None and jrs_env.store.get_entry(JOB) is None
    first_run = IntentStore.read_spec(stale.spec_uri)["attempt"]["run_id"]
    helper = finish_when_polled(fake, fake.submissions[0], len(fake.requests))
    states = run_dag(DAY_2)
    helper.join(timeout=60)
    assert states["submit"] == "success", states
    assert len(fake.submissions) == 1, "the other run submitted a second driver"
    entry = jrs_env.store.get_entry(JOB)
    assert entry is not None and entry.result.outputs == {"output": output_of(fake, fake.submissions[0])}
    assert entry.result.attempt is not None and entry.result.attempt.run_id != first_run  # adopted by run 2


def test_a_live_driver_in_the_state_store_that_no_intent_covers_is_not_submitted_beside(jrs_env, fake, retry_step):
    # The state store names the first try's driver, which runs on, and the job has no intent (as
    # after an unguarded run while the store was down): the retry submits nothing beside it.
    store = jrs_env.store
    retry_step(lambda: store.client.delete(store.keys.intent(JOB)))
    states = run_dag()
    assert states["submit"] == "failed", states
    assert len(fake.submissions) == 1, "a second driver was submitted beside the first try's"
    assert store.get_entry(JOB) is None


@pytest.mark.parametrize("first_driver", ["finished", "live"])
def test_an_unguarded_retry_submits_its_own_driver_never_the_guarded_trys(
    jrs_env, fake, monkeypatch, capfd, first_driver
):
    # The first try (guarded) submits a driver and persists its id in the task state store; the driver
    # then finishes without its commit marker, or stays live while the try's polling ends. The store is
    # then gone, and on_store_unavailable=run: the retry runs unguarded. It must submit its own driver,
    # into its own unguarded-* folder, and report that folder. Before the fix the provider reattached:
    # to a finished driver it returned at once, and the task reported SUCCEEDED for a folder nobody
    # wrote; to a live one it polled a driver of another try.
    unreachable = (
        f"redis://127.0.0.1:{free_port()}/0?namespace={jrs_env.namespace}&on_store_unavailable=run"
        "&connect_timeout=0.5&read_timeout=0.5&retries=0"
    )
    persisted: list[object] = []

    def the_store_goes_once_the_first_driver_is_submitted() -> None:
        # The first try's store client and connection are resolved before it submits: only the retry
        # reads the connection again.
        with fake.asked:
            fake.asked.wait_for(lambda: len(fake.submissions) == 1, 120)
            os.environ["AIRFLOW_CONN_JRS_DEFAULT"] = unreachable  # restored by monkeypatch (set below)
            fake.state_on_submit = "RUNNING"  # the next driver: its polling ends when it finishes
        if first_driver == "finished":  # without its marker: the first try fails, and retries
            finish(fake, fake.submissions[0], marker=False)

        def polled() -> bool:  # the provider polls a second driver's status
            return len(fake.submissions) == 2 and f"GET /v1/submissions/status/{fake.submissions[1]}" in fake.requests

        with fake.asked:
            fake.asked.wait_for(polled, 240)
        if len(fake.submissions) == 2:
            persisted.append(state_store_id())
            finish(fake, fake.submissions[1])

    monkeypatch.setenv("AIRFLOW_CONN_JRS_DEFAULT", os.environ["AIRFLOW_CONN_JRS_DEFAULT"])
    helper = threading.Thread(target=the_store_goes_once_the_first_driver_is_submitted, daemon=True)
    helper.start()
    states = run_dag()
    out, err = capfd.readouterr()
    assert states["submit"] == "success", (out + err)[-3000:]
    assert len(fake.submissions) == 2, "the unguarded retry reattached to the first try's driver"
    reported = re.findall(r"output in (\S+) is not recorded", out + err)
    own = output_of(fake, fake.submissions[1])
    assert reported == [own] and "/unguarded-" in own, reported
    assert Path(marker_path(own)).exists()  # the folder it reports is one its own driver wrote
    assert persisted == [fake.submissions[1]]  # its id, for a later guarded try to check before submitting
    assert jrs_env.store.get_entry(JOB) is None  # unguarded: nothing recorded
