"""The protocol's cleanup without Airflow: :func:`commit_job` on a JobNamespace, with
its own files (local paths, fsspec URLs), as the fault trials call it.

The operator's outcomes through the same code are in test_cleanup_outcomes.py; these pin what
the Airflow-free entry point adds: the default :class:`Files`, the retry policy, and that a
result written while it runs is still cleaned up for in turn."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import fsspec
import pytest

from airflow_jrs.domain.paths import spec_path, staging_path
from airflow_jrs.exceptions import CleanupError, NoSuchJobResultError
from airflow_jrs.protocol import JobNamespace, RetryPolicy, commit_job, settings_for
from airflow_jrs.protocol.cleanup import LOCAL_OR_FSSPEC, folders_named_by
from airflow_jrs.protocol.steps import observe_steps
from airflow_jrs.store import JobResult, JobStatus
from airflow_jrs.store.redis.leases import RedisJobLease
from airflow_jrs.store.redis.namespace import RedisJobNamespace

NO_WAIT = RetryPolicy(attempts=3, initial_delay=0.0, max_delay=0.0)


def _jobs(redis_url: str, namespace: str, output_root: str, spec_root: str) -> JobNamespace:
    return RedisJobNamespace.from_url(redis_url, settings_for(namespace, output_root=output_root, spec_root=spec_root))


@pytest.fixture
def jobs(redis_url, namespace, tmp_path):
    j = _jobs(redis_url, namespace, str(tmp_path / "output"), str(tmp_path / "specs"))
    yield j
    j.close()


def _write(jobs: JobNamespace, outputs: dict[str, str], fingerprint: str = "a" * 64, **kw) -> int:
    """A SUCCEEDED result written as an attempt writes it: under its own lease, then released."""
    lease = jobs.lease("j")
    token = lease.acquire()
    try:
        result = JobResult(job_id="j", status=JobStatus.SUCCEEDED, fingerprint=fingerprint, outputs=outputs)
        jobs.results.create_dirty_result(result, fence=token, **kw)
    finally:
        lease.release()
    return token


def _staging(jobs: JobNamespace, fence: int) -> Path:
    folder = Path(staging_path(jobs.settings.output_root, jobs.namespace, "j", fence))
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "part-0").write_text("rows")
    return folder


def test_commit_job_removes_losers_and_specs_keeps_the_winner_and_commits(jobs):
    winner, loser = _staging(jobs, 2), _staging(jobs, 1)
    spec = Path(spec_path(jobs.settings.spec_root, jobs.namespace, "j", 1))
    spec.parent.mkdir(parents=True)
    spec.write_text("{}")
    jobs.results.client.set(jobs.results.keys.fence_counter, 1)
    assert int(_write(jobs, {"output": str(winner)})) == 2
    payload = commit_job(jobs, "j", retry=NO_WAIT)
    assert payload["status"] == "SUCCEEDED" and jobs.results.get_entry("j").is_clean
    assert (winner / "data" / "part-0").read_text() == "rows"
    assert not loser.exists() and not spec.parent.exists()
    assert commit_job(jobs, "j", retry=NO_WAIT) == payload  # already clean: nothing to do


def test_commit_job_of_a_job_without_result_says_what_to_check(jobs):
    with pytest.raises(NoSuchJobResultError, match="has no result to commit in namespace"):
        commit_job(jobs, "never-ran", retry=NO_WAIT)


def test_commit_job_keeps_the_staging_of_an_attempt_holding_the_lease(jobs):
    _write(jobs, {"output": str(_staging(jobs, 1))})
    lease = RedisJobLease(jobs.client, jobs.namespace, "j", ttl=30)
    live = _staging(jobs, lease.acquire())  # a recompute runs now
    try:
        commit_job(jobs, "j", retry=NO_WAIT)
    finally:
        lease.release()
    assert (live / "data" / "part-0").exists()


def test_a_result_written_during_commit_job_gets_its_own_cleanup(jobs):
    _write(jobs, {"output": str(_staging(jobs, 1))})
    seen: list[str | None] = []

    def recompute(step: str) -> None:
        if step == "cleanup_before_clean" and not seen[1:]:
            _write(jobs, {"output": str(_staging(jobs, 2))}, "b" * 64, supersede=True)

    observe_steps(recompute)
    try:
        commit_job(jobs, "j", cleanup_callables=[lambda result, ctx: seen.append(result.fingerprint)], retry=NO_WAIT)
    finally:
        observe_steps(None)
    assert seen == ["a" * 64, "b" * 64]
    entry = jobs.results.get_entry("j")
    assert entry.is_clean and entry.result.fingerprint == "b" * 64


def test_a_failing_step_is_retried_then_fails_naming_the_step_and_what_to_do(jobs):
    _write(jobs, {"output": str(_staging(jobs, 1))})
    calls: list[object] = []

    def flaky(result: JobResult, ctx: object) -> None:
        calls.append(ctx)
        if len(calls) < 2:
            raise OSError("transient")

    commit_job(jobs, "j", context="ctx", cleanup_callables=[flaky], retry=NO_WAIT)
    assert calls == ["ctx", "ctx"] and jobs.results.get_entry("j").is_clean

    _write(jobs, {"output": str(_staging(jobs, 3))}, "c" * 64, supersede=True)

    def broken(result: JobResult, ctx: object) -> None:
        raise PermissionError("denied")

    with pytest.raises(CleanupError, match=r"'broken\(j\)' failed 3 times.*stays dirty.*Fix the cause"):
        commit_job(jobs, "j", cleanup_callables=[broken], retry=NO_WAIT)
    assert jobs.results.get_entry("j").is_dirty


def test_the_default_files_reach_fsspec_urls(redis_url, namespace, tmp_path):
    """Output and spec roots on an fsspec filesystem (here memory://) are cleaned up like local ones."""
    root = f"memory://jrs-{uuid.uuid4().hex}"
    fs = fsspec.filesystem("memory")
    jobs = _jobs(redis_url, namespace, f"{root}/output", f"{root}/specs")
    try:
        write: Callable[[str], None] = lambda url: fs.pipe(url, b"rows")  # noqa: E731 (a file's bytes)
        winner = staging_path(f"{root}/output", namespace, "j", 2)
        write(f"{staging_path(f'{root}/output', namespace, 'j', 1)}/data/part-0")
        write(f"{winner}/data/part-0")
        write(spec_path(f"{root}/specs", namespace, "j", 1))
        write(f"{root}/extra/file")
        jobs.results.client.set(jobs.results.keys.fence_counter, 1)
        _write(jobs, {"output": winner})
        commit_job(jobs, "j", cleanup_paths=[f"{root}/extra"], retry=NO_WAIT)
        assert fs.cat(f"{winner}/data/part-0") == b"rows"
        assert not fs.exists(staging_path(f"{root}/output", namespace, "j", 1))
        assert not fs.exists(spec_path(f"{root}/specs", namespace, "j", 1))
        assert not fs.exists(f"{root}/extra")
        assert LOCAL_OR_FSSPEC.remove(f"{root}/extra") is False  # already gone
    finally:
        jobs.close()
        fs.rm(root.removeprefix("memory://"), recursive=True)


def test_output_locations_compare_whatever_their_spelling():
    result = JobResult(
        job_id="j",
        status=JobStatus.SUCCEEDED,
        outputs={"a": "file:///data/ns/j/fence-1/x", "b": "s3://conn@bucket/ns/j/fence-2-ab/", "c": "/else/where"},
    )
    assert folders_named_by(result, "/data/ns/j/") == {"fence-1"}
    assert folders_named_by(result, "s3://bucket/ns/j") == {"fence-2-ab"}
