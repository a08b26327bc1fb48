"""Each revert of a protocol fix (jrs_testbench/trials/reverts.py; "Defect N" below is revert N) takes its fix out.

Every scenario runs the product's own code (store, lease, heartbeats, takeover, cleanup,
JobAttempt, the standalone lookup) against the session's real redis-server, twice, in fresh
processes: once plain and once with ``JRS_TRIALS_REVERT=<n>``, where ``apply_from_env()`` runs
first, as in every trial process. The test asserts the fix's behaviour without the revert and
the pre-fix behaviour with it, so a revert that silently stopped reverting (or a fix that
disappeared) fails here before it makes the fault trials prove nothing.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

from airflow_jrs.settings import settings_for
from airflow_jrs.store import Attempt, JobResult, JobStatus
from airflow_jrs.store.namespace import JobNamespace
from airflow_jrs.store.redis.keys import KeySpace
from airflow_jrs.store.redis.namespace import RedisJobNamespace
from jrs_testbench.trials import reverts

ROOT = Path(__file__).resolve().parents[2]
JOB = "job.reverts"
ATTEMPT = Attempt("dag", "task", "run", 1)

#: What a child runs first: the revert (as every trial process does), then the helpers' imports.
_PRELUDE = f"""
from __future__ import annotations
import json
from pathlib import Path
from typing import Any
from jrs_testbench.trials.reverts import apply_from_env
REVERTED = apply_from_env()
from airflow_jrs.settings import settings_for
from airflow_jrs.store import JobNamespace, RedisJobNamespace
from airflow_jrs.store import Attempt, JobResult, JobStatus
from airflow_jrs.store.redis.keys import KeySpace
JOB = {JOB!r}
ATTEMPT = Attempt("dag", "task", "run", 1)
"""


def jobs_for(url: str, ns: str, tmp: str) -> JobNamespace:
    return RedisJobNamespace.from_url(url, settings_for(ns, output_root=f"{tmp}/out", spec_root=f"{tmp}/specs"))


def write_result(jobs: JobNamespace, folder: str, rows: str = "3") -> int:
    """A SUCCEEDED dirty result under a fresh lease whose output is ``folder`` (created, with data)."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    (Path(folder) / "part-0").write_text(rows)
    lease = jobs.lease(JOB)
    token = lease.acquire()
    result = JobResult(
        job_id=JOB, status=JobStatus.SUCCEEDED, outputs={"output": folder}, fingerprint="fp", attempt=ATTEMPT
    )
    jobs.results.create_dirty_result(result, fence=token, supersede=True)
    lease.release()
    return int(token)


def _run(scenario: Any, revert: int | None, redis_url: str, tmp_path: Path) -> Any:
    """Run ``scenario(url, namespace, tmp)`` in a fresh interpreter, reverted or not; its JSON answer."""
    env = {k: v for k, v in os.environ.items() if k != reverts.ENV}
    if revert is not None:
        env[reverts.ENV] = str(revert)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(ROOT)) if p)
    tmp = tmp_path / f"r{revert or 0}"
    tmp.mkdir()
    ns = f"rv-{uuid.uuid4().hex[:10]}"
    code = (
        _PRELUDE
        + "".join(textwrap.dedent(inspect.getsource(f)) for f in (jobs_for, write_result, scenario))
        + f"\nprint('ANSWER ' + json.dumps({scenario.__name__}({redis_url!r}, {ns!r}, {str(tmp)!r})))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    answers = [line for line in proc.stdout.splitlines() if line.startswith("ANSWER ")]
    assert proc.returncode == 0 and answers, f"scenario failed (revert {revert}):\n{proc.stdout}\n{proc.stderr}"
    return json.loads(answers[-1].removeprefix("ANSWER "))


# -- scenarios: run in the child process, with the prelude's names ------------------------------
def adopted_output_after_cleanup(url: str, ns: str, tmp: str) -> Any:
    """Defect 1: a result adopted from a predecessor names the predecessor's folder; the real
    cleanup (commit_job) commits it. Does the output still exist?"""
    from airflow_jrs.domain.paths import staging_root
    from airflow_jrs.protocol.cleanup import commit_job

    jobs = jobs_for(url, ns, tmp)
    adopted = f"{staging_root(jobs.settings.output_root, ns, JOB)}/fence-1-00aa00aa00aa00aa"
    jobs.client.incrby(KeySpace(ns).fence_counter, 5)  # the predecessor (fence 1) and others came first
    write_result(jobs, adopted)  # the successor (fence 6) adopts: its result names the predecessor's folder
    commit_job(jobs, JOB)
    return {"clean": jobs.results.get_entry(JOB).is_clean, "output_exists": Path(adopted).exists()}


def new_result_during_cleanup(url: str, ns: str, tmp: str) -> Any:
    """Defect 2: a recompute writes a new result (new folder) right after the cleanup read the
    old one. Is the clean entry's output still there?"""
    from airflow_jrs.domain.paths import staging_root
    from airflow_jrs.protocol import steps
    from airflow_jrs.protocol.cleanup import commit_job

    jobs = jobs_for(url, ns, tmp)
    root = staging_root(jobs.settings.output_root, ns, JOB)
    write_result(jobs, f"{root}/fence-1-0101010101010101")
    newer = f"{root}/fence-9-0909090909090909"
    done = []

    def recompute(step: str) -> None:
        if step == "cleanup_after_read" and not done:
            done.append(step)
            jobs.results.forget_result(JOB)
            write_result(jobs, newer, rows="5")

    steps.observe_steps(recompute)
    commit_job(jobs, JOB)
    entry = jobs.results.get_entry(JOB)
    return {"clean": entry.is_clean, "clean_output_exists": Path(entry.result.outputs["output"]).exists()}


def stale_holder_forgets(url: str, ns: str, tmp: str) -> Any:
    """Defect 3: a recomputing holder whose lease is gone forgets the entry it read, after a newer
    holder wrote its own result. Does the newer result survive?"""
    jobs = jobs_for(url, ns, tmp)
    write_result(jobs, f"{tmp}/first")
    stale = jobs.lease(JOB)
    stale.acquire()
    read = jobs.results.get_entry(JOB)
    stale.release()  # its lease is gone (expired while it was paused)
    fresh = jobs.lease(JOB)
    token = fresh.acquire()
    jobs.results.forget_result(JOB, expected=read, fence=token)
    newer = JobResult(job_id=JOB, status=JobStatus.SUCCEEDED, outputs={"output": f"{tmp}/newer"}, fingerprint="fp")
    jobs.results.create_dirty_result(newer, fence=token)
    fresh.release()
    error = None
    try:
        jobs.results.forget_result(JOB, expected=read, fence=stale.token)
    except Exception as exc:
        error = type(exc).__name__
    return {"newer_result_kept": jobs.results.get_entry(JOB) is not None, "stale_forget_error": error}


def cluster_client_exits(url: str, ns: str, tmp: str) -> Any:
    """Defect 4: a cluster launcher whose client ended while its driver runs (no commit marker).
    What does the real JobAttempt conclude, and does the intent stay for the next attempt?"""
    from airflow_jrs.protocol import JobAttempt, JobSpec
    from airflow_jrs.protocol.launcher import RUNS, Launcher

    class DriverOutlivesClient(Launcher):
        name, cluster = "stub-cluster", True

        def __init__(self, fail: bool) -> None:
            self.fail = fail

        def prepare(self, launch: Any) -> dict:
            return {"application": "stub"}

        def run(self, launch: Any) -> None:
            if self.fail:
                raise RuntimeError("lost the connection to the master while waiting for the driver")

        def outcome(self, launch: Any, recorder: Any, *, failed: bool) -> Any:
            return RUNS, "driver-20260101000000-0000"

    jobs = jobs_for(url, ns, tmp)
    answers = {}
    for fail in (False, True):
        job = f"{JOB}.{'failed' if fail else 'ok'}"
        try:
            kind = JobAttempt(jobs, JobSpec(job, "fp"), ATTEMPT, DriverOutlivesClient(fail)).run().kind
        except Exception as exc:
            kind = type(exc).__name__
        entry = jobs.results.get_entry(job)
        answers["client_failed" if fail else "client_ok"] = {
            "outcome": kind,
            "status": entry.result.status.value if entry else None,
            "intent_kept": jobs.intents.get(job) is not None,
        }
    return answers


def standalone_driver_lookup(url: str, ns: str, tmp: str) -> Any:
    """Defect 5: the master runs the predecessor's driver (recorded and unrecorded). Does the
    product's standalone cluster mode find it, or hold back a new submission?"""
    from types import SimpleNamespace

    from airflow_jrs.launch.deploy_modes.standalone import StandaloneMode, refuse_while_unrecorded_driver_may_run
    from jrs_testbench.fake_standalone import FakeStandaloneMaster

    with FakeStandaloneMaster() as master:
        driver = master.submit({})["driver_id"]
        mode = StandaloneMode(master.url, cluster=True)
        found = mode.cluster_predecessors(None, ns, JOB, "tag", [driver])
        intent = SimpleNamespace(
            job_id=JOB, fence=1, pid=1, host="h", app_name="a", application_id=None, started_at=0.0
        )
        try:
            refuse_while_unrecorded_driver_may_run(mode, intent)
            refused = None
        except Exception as exc:
            refused = type(exc).__name__
    return {"predecessors": len(found), "unrecorded_driver_refusal": refused}


def reissued_token(url: str, ns: str, tmp: str) -> Any:
    """Defect 6: a failover loses the lease and the counter's INCR, so the next attempt gets the
    same token. Can the stale holder still renew the fresh holder's lease?"""
    jobs = jobs_for(url, ns, tmp)
    keys = KeySpace(ns)
    stale = jobs.lease(JOB)
    first = stale.acquire()
    jobs.client.delete(keys.lease(JOB))
    jobs.client.decr(keys.fence_counter)
    fresh = jobs.lease(JOB)
    second = fresh.acquire()
    return {"same_token": int(first) == int(second), "stale_renews": stale.renew()}


def heartbeat_gone(url: str, ns: str, tmp: str) -> Any:
    """Defect 7: the heartbeat expired early (deleted here) between two beats of a supervisor.
    Does the next beat stop it, or bring the key back?"""
    import os

    jobs = jobs_for(url, ns, tmp)
    lease = jobs.lease(JOB)
    token = lease.acquire()
    beats = jobs.heartbeats
    beats.beat(JOB, token, 30_000, host="h", pid=os.getpid(), child=0, first=True)
    jobs.client.delete(KeySpace(ns).heartbeat(JOB))
    try:
        beats.beat(JOB, token, 30_000, host="h", pid=os.getpid(), child=1)
        error = None
    except Exception as exc:
        error = type(exc).__name__
    return {"later_beat_error": error, "heartbeat_exists": beats.get(JOB) is not None}


def holder_without_pid(url: str, ns: str, tmp: str) -> Any:
    """Defect 8: a holder on this host whose owner names no pid (it cannot be inspected). Does the
    takeover judge it dead?"""
    from airflow_jrs.protocol.takeover import judge
    from airflow_jrs.store.leases.lease import LeaseHolder, default_owner

    owner = {k: v for k, v in default_owner().items() if k != "pid"}
    verdict = judge(LeaseHolder(1, owner, 30_000), None, None, namespace=ns, job_id=JOB)
    return {"dead": verdict.dead, "why": verdict.why}


def lost_acquire_reply(url: str, ns: str, tmp: str) -> Any:
    """Defect 9: the reply to ACQUIRE was lost and the same command is sent again (same nonce).
    Does the attempt get its own lease back?"""
    jobs = jobs_for(url, ns, tmp)
    lease = jobs.lease(JOB)
    first = lease.acquire()
    try:
        again = int(lease.acquire())
        error = None
    except Exception as exc:
        again, error = None, type(exc).__name__
    return {"first": int(first), "again": again, "error": error}


# -- the expectations -----------------------------------------------------------------------------
CASES = [
    (1, adopted_output_after_cleanup, {"clean": True, "output_exists": True}, {"clean": True, "output_exists": False}),
    (
        2,
        new_result_during_cleanup,
        {"clean": True, "clean_output_exists": True},
        {"clean": True, "clean_output_exists": False},
    ),
    (
        3,
        stale_holder_forgets,
        {"newer_result_kept": True, "stale_forget_error": "LeaseLostError"},
        {"newer_result_kept": False, "stale_forget_error": None},
    ),
    (
        4,
        cluster_client_exits,
        {
            "client_ok": {"outcome": "DriverMayStillRunError", "status": None, "intent_kept": True},
            "client_failed": {"outcome": "DriverMayStillRunError", "status": None, "intent_kept": True},
        },
        {
            "client_ok": {"outcome": "computed", "status": "SUCCEEDED", "intent_kept": False},
            "client_failed": {"outcome": "RuntimeError", "status": None, "intent_kept": False},
        },
    ),
    (
        5,
        standalone_driver_lookup,
        {"predecessors": 1, "unrecorded_driver_refusal": "UnrecordedDriverError"},
        {"predecessors": 0, "unrecorded_driver_refusal": None},
    ),
    (6, reissued_token, {"same_token": True, "stale_renews": False}, {"same_token": True, "stale_renews": True}),
    (
        7,
        heartbeat_gone,
        {"later_beat_error": "HeartbeatGone", "heartbeat_exists": False},
        {"later_beat_error": None, "heartbeat_exists": True},
    ),
    (8, holder_without_pid, {"dead": False}, {"dead": True}),
    (9, lost_acquire_reply, {"error": None}, {"error": "LeaseHeldError", "again": None}),
]


@pytest.mark.parametrize(("number", "scenario", "fixed", "reverted"), CASES, ids=[f"revert-{c[0]}" for c in CASES])
def test_a_revert_brings_back_the_pre_fix_behaviour(number, scenario, fixed, reverted, redis_url, tmp_path):
    plain = _run(scenario, None, redis_url, tmp_path)
    assert {k: plain[k] for k in fixed} == fixed, plain
    broken = _run(scenario, number, redis_url, tmp_path)
    assert {k: broken[k] for k in reverted} == reverted, broken


def test_every_fix_of_issue_18_has_a_revert_with_a_docstring_naming_its_commit():
    assert sorted(reverts.REVERTS) == list(range(1, 13))  # 10: Connect session release; 11-12: result documents
    for number, revert in reverts.REVERTS.items():
        doc = revert.__doc__ or ""
        assert f"Defect {number} (commit" in doc and "Breaks" in doc, revert.__name__


def test_a_revert_whose_code_changed_shape_fails_loudly(monkeypatch):
    """A refactor must break the revert, never make it a silent no-op."""
    from airflow_jrs.store.redis import result_scripts

    monkeypatch.setattr(result_scripts, "FORGET_RESULT", "-- a rewritten script without the old fence line\nreturn 1\n")
    with pytest.raises(reverts.RevertShapeError, match="FORGET_RESULT"):
        reverts.revert_3_unfenced_forget()


def test_an_unknown_revert_number_is_refused_with_what_is_allowed():
    with pytest.raises(ValueError, match="JRS_TRIALS_REVERT must be"):
        reverts.apply_from_env({reverts.ENV: "13"})
    with pytest.raises(ValueError, match="number 1-12"):
        reverts.apply_from_env({reverts.ENV: "six"})
    assert reverts.apply_from_env({}) is None
