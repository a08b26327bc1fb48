"""JrsCleanupOperator outcomes called directly (no dag.test): what an Asset event may announce,
and which staging a late cleanup must leave alone."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
from airflow.providers.common.compat.sdk import AirflowSkipException
from airflow.sdk import Asset
from airflow.sdk.execution_time.context import OutletEventAccessors

from airflow_jrs.domain.paths import staging_path
from airflow_jrs.exceptions import CleanupError
from airflow_jrs.operators import JrsCleanupOperator
from airflow_jrs.protocol.steps import observe_steps
from airflow_jrs.store import JobResult, JobStatus, RedisJobResultStore
from airflow_jrs.store.redis.leases import RedisJobLease
from jrs_testbench.helpers import connection_env

DATA = Asset("file:///data/totals")


@pytest.fixture
def store(monkeypatch, redis_url, namespace, tmp_path):
    for key, value in connection_env(redis_url, namespace, data_dir=tmp_path).items():
        monkeypatch.setenv(key, value)
    s = RedisJobResultStore(redis_url, namespace)
    yield s
    s.client.close()


def context() -> dict:
    # The Task SDK's own accessors, not a dict: Airflow 3.1's Asset cannot be hashed (its
    # __hash__ hashes a dict), so the real mapping keys by the asset's unique key.
    return {"ti": SimpleNamespace(try_number=1), "run_id": "r", "outlet_events": OutletEventAccessors()}


def test_committing_only_failed_jobs_emits_no_asset_event(store):
    store.create_dirty_result(JobResult(job_id="j", status=JobStatus.FAILED, error="spark-submit failed"))
    op = JrsCleanupOperator(task_id="cleanup", jobs=["j"], outlets=[DATA])
    ctx = context()
    with pytest.raises(AirflowSkipException, match="none SUCCEEDED"):
        op.execute(ctx)
    assert store.get_entry("j").is_clean  # committed all the same
    assert len(ctx["outlet_events"]) == 0


def test_asset_event_of_a_mixed_commit_names_only_succeeded_jobs(store):
    store.create_dirty_result(JobResult(job_id="ok", status=JobStatus.SUCCEEDED, outputs={"o": "/x"}))
    store.create_dirty_result(JobResult(job_id="bad", status=JobStatus.CANCELED))
    ctx = context()
    JrsCleanupOperator(task_id="cleanup", jobs=["ok", "bad"], outlets=[DATA]).execute(ctx)
    extra = ctx["outlet_events"][DATA].extra
    assert [j["job_id"] for j in extra["jobs"]] == ["ok"]
    assert extra["unsuccessful"] == ["bad"]


def test_late_cleanup_keeps_the_staging_of_the_attempt_holding_the_lease(store, tmp_path, redis_url):
    job_root = tmp_path / "output" / store.namespace / "j"
    for fence in (1, 2, 3):
        (job_root / f"fence-{fence}").mkdir(parents=True)
    store.create_dirty_result(JobResult(job_id="j", status=JobStatus.SUCCEEDED, outputs={"o": "x"}), fence=None)
    store.client.set(store.keys.fence_counter, 2)  # fences 1 and 2 were handed out before
    lease = RedisJobLease(store.client, store.namespace, "j", ttl=30)
    assert int(lease.acquire()) == 3  # an attempt recomputing the job (e.g. after a code change) runs now
    try:
        JrsCleanupOperator(task_id="cleanup", jobs=["j"]).execute(context())
    finally:
        lease.release()
    assert sorted(p.name for p in Path(job_root).iterdir()) == ["fence-3"]


# -- what the cleanup keeps, and what it commits -------------------------------------------------

OLD_FP, NEW_FP = "a" * 64, "b" * 64


def _write_result(store, fingerprint: str, outputs: dict[str, str], *, supersede: bool = False) -> int:
    """Write a SUCCEEDED result as an attempt does: under a lease of its own, then release it."""
    lease = RedisJobLease(store.client, store.namespace, "j", ttl=30)
    token = lease.acquire()
    try:
        result = JobResult(job_id="j", status=JobStatus.SUCCEEDED, fingerprint=fingerprint, outputs=outputs)
        store.create_dirty_result(result, fence=token, supersede=supersede)
    finally:
        lease.release()
    return token


def _staging(store, tmp_path, fence: int) -> Path:
    folder = Path(staging_path(str(tmp_path / "output"), store.namespace, "j", fence))
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "part-0").write_text("rows")
    return folder


@pytest.fixture
def step_action():
    """Run an action once when the cleanup announces a step (the crash-point hook, used to act)."""
    actions: dict[str, Callable[[], None]] = {}

    def observer(step: str) -> None:
        action = actions.pop(step, None)
        if action is not None:
            action()

    observe_steps(observer)
    yield actions
    observe_steps(None)


def test_cleanup_keeps_the_staging_folder_an_adopted_result_points_to(store, tmp_path):
    """An adopted output: a successor adopts fence 1's finished output and writes the result under its own
    fence; the folder the outputs live in is not the result's fence's, and must be kept."""
    adopted, loser = _staging(store, tmp_path, 1), _staging(store, tmp_path, 2)
    store.client.set(store.keys.fence_counter, 2)  # fences 1 and 2 ran before; the successor gets 3
    token = _write_result(store, OLD_FP, {"output": str(adopted)})
    assert int(token) == 3
    JrsCleanupOperator(task_id="cleanup", jobs=["j"]).execute(context())
    assert store.get_entry("j").is_clean
    assert (adopted / "data" / "part-0").read_text() == "rows", "the adopted output was removed"
    assert not loser.exists()


def test_a_result_written_while_the_cleanup_ran_is_committed_only_after_its_cleanup_ran(store, tmp_path, step_action):
    """A result written meanwhile: a recompute writes a new result between the cleanup's read and its clean. The
    old cleanup must not commit it on the strength of callables that ran for the old one: the
    clean is a compare-and-set on the entry it read, and the cleanup runs again for the new one."""
    old = _staging(store, tmp_path, 1)
    _write_result(store, OLD_FP, {"output": str(old)})
    new_outputs: dict[str, str] = {}

    def recompute() -> None:  # a changed-code run: new fingerprint, supersedes the dirty result
        new = _staging(store, tmp_path, 2)
        new_outputs["output"] = str(new)
        assert int(_write_result(store, NEW_FP, {"output": str(new)}, supersede=True)) == 2

    step_action["cleanup_before_clean"] = recompute
    seen: list[tuple[str | None, bool]] = []

    def callable_(result, ctx) -> None:
        seen.append((result.fingerprint, store.get_entry("j").is_clean))

    committed = JrsCleanupOperator(task_id="cleanup", jobs=["j"], cleanup_callables=[callable_]).execute(context())
    entry = store.get_entry("j")
    assert entry.result.fingerprint == NEW_FP
    assert seen == [(OLD_FP, False), (NEW_FP, False)], "the new result was committed before its cleanup ran"
    assert entry.is_clean and committed[0]["fingerprint"] == NEW_FP
    assert (Path(new_outputs["output"]) / "data" / "part-0").exists()
    assert_clean_outputs_exist_without_marker(store)


def test_a_cleanup_that_keeps_meeting_new_results_gives_up_clearly_and_commits_none(store, tmp_path, step_action):
    """Bounded: a cleanup starts over at most MAX_ROUNDS times, then fails naming the job; the
    newest result stays dirty for its own cleanup."""
    _write_result(store, OLD_FP, {"output": str(_staging(store, tmp_path, 1))})
    written = []

    def another_result() -> None:
        fingerprint = f"{len(written):064x}"
        _write_result(store, fingerprint, {"output": str(tmp_path / fingerprint[-4:])}, supersede=True)
        written.append(fingerprint)
        step_action["cleanup_before_clean"] = another_result  # and again next round

    step_action["cleanup_before_clean"] = another_result
    with pytest.raises(CleanupError, match=r"job 'j': its result changed 3 times while this cleanup ran") as info:
        JrsCleanupOperator(task_id="cleanup", jobs=["j"]).execute(context())
    assert "clear this task" in str(info.value)
    assert len(written) == 3
    entry = store.get_entry("j")
    assert entry.is_dirty and entry.result.fingerprint == written[-1]


def test_a_staging_folder_started_after_the_cleanups_read_is_kept(store, tmp_path, step_action):
    """A stale view: an attempt that takes the lease after the cleanup read the live fences (a recompute
    starting) must not lose its staging folder to that stale view: live fences are read again
    before each removal."""
    done = _staging(store, tmp_path, 1)
    _write_result(store, OLD_FP, {"output": str(done)})
    started: dict[str, object] = {}

    def recompute_starts() -> None:
        lease = RedisJobLease(store.client, store.namespace, "j", ttl=30)
        started["lease"] = lease
        started["folder"] = _staging(store, tmp_path, lease.acquire())

    step_action["cleanup_after_read"] = recompute_starts
    try:
        JrsCleanupOperator(task_id="cleanup", jobs=["j"]).execute(context())
    finally:
        if "lease" in started:
            started["lease"].release()  # type: ignore[attr-defined]
    assert "folder" in started, "the cleanup never announced cleanup_after_read"
    assert (started["folder"] / "data" / "part-0").exists(), "a live attempt's staging was removed"  # type: ignore[operator]
    assert (done / "data" / "part-0").exists()


def assert_clean_outputs_exist_without_marker(store) -> None:
    """These results are written by hand (no Spark, no marker): their outputs must just exist."""
    for entry in store.list_entries():
        if entry.is_clean:
            for location in entry.result.outputs.values():
                assert Path(location).exists(), f"{location} named by a clean entry is gone"


def test_user_cleanup_steps_never_run_for_a_result_that_was_replaced_meanwhile(store, tmp_path):
    """Like the staging removals, each cleanup path and callable first
    checks that the job's entry is still the one read. A result written after the first callable
    ran (a changed-code run) must not get the second callable for the old result: the cleanup
    starts over for the new one."""
    _write_result(store, OLD_FP, {"output": str(_staging(store, tmp_path, 1))})
    seen: list[tuple[str, str | None]] = []

    def first(result, ctx) -> None:
        seen.append(("first", result.fingerprint))
        if len(seen) == 1:  # a changed-code run writes its result while this cleanup runs
            _write_result(store, NEW_FP, {"output": str(_staging(store, tmp_path, 2))}, supersede=True)

    def second(result, ctx) -> None:
        seen.append(("second", result.fingerprint))

    op = JrsCleanupOperator(task_id="cleanup", jobs=["j"], cleanup_callables=[first, second])
    op.execute(context())
    assert seen == [("first", OLD_FP), ("first", NEW_FP), ("second", NEW_FP)], seen
    assert store.get_entry("j").is_clean and store.get_entry("j").result.fingerprint == NEW_FP


def test_a_mapped_submit_with_no_map_index_announces_nothing(store):
    """A mapped submit expanded over nothing leaves the cleanup no job to commit: an Asset event
    with ``jobs=[]`` would start a consumer on nothing, so the task ends skipped (no event)."""
    from airflow.sdk import DAG

    from airflow_jrs.operators import JrsSparkSubmitOperator

    with DAG("d", schedule=None):
        mapped = JrsSparkSubmitOperator.partial(task_id="regions", application="/apps/a.py").expand(
            application_args=[["--region", "eu"]]
        )
        op = JrsCleanupOperator(task_id="cleanup", jobs=[mapped], outlets=[DATA])
        plain = JrsCleanupOperator(task_id="cleanup2", jobs=[mapped])
    ctx = context()
    ctx["ti"] = SimpleNamespace(
        try_number=1,
        dag_id="d",
        run_id="r",
        get_task_states=lambda **kw: {"r": {"regions": "skipped"}},
        xcom_pull=lambda **kw: pytest.fail("no map index: nothing to pull"),
    )
    with pytest.raises(AirflowSkipException, match=r"no job to commit in this run: no Asset event for"):
        op.execute(ctx)
    assert len(ctx["outlet_events"]) == 0
    # without an Asset outlet there is nothing to announce: it succeeds, having committed nothing
    assert plain.execute(ctx) == []
