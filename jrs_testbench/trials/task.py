"""One Airflow-like task try of a fault trial: the product's :class:`~airflow_jrs.protocol.JobAttempt`.

    python -m jrs_testbench.trials.task '<json spec>'

(the runner forks and calls :func:`run_task` with the same spec: an interpreter start per try
would cost more than the try). The try builds :class:`~airflow_jrs.protocol.JobNamespace` through
its host's Redis URL (the host's proxy: partitions cut it alone), hands the stand-in launcher
(:mod:`.launcher`) to ``JobAttempt`` and calls ``run()``, as the operator does with spark-submit.
SIGTERM is Airflow's ``on_kill``: ``attempt.kill()``, then the task ends (Airflow raises in the
task after ``on_kill``).

Every step and outcome goes to the history log, recorded outside the product: the lease
acquired or taken over (fence), the lease lost, each ACKNOWLEDGED result write (fence, status)
and each refused one with its error, the recompute's forget, the steps
(:data:`airflow_jrs.protocol.steps.STEPS`, where a planned crash SIGKILLs the process) and the
outcome or the error with its message. Exit codes: :data:`OK`, :data:`FAILED` (Airflow retries),
:data:`NO_RETRY` (ended on request: Airflow must not retry).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib.util
import json
import logging
import os
import signal
import sys
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

from airflow_jrs.domain import recompute
from airflow_jrs.exceptions import JobEndedOnRequestError, LeaseHeldError
from airflow_jrs.protocol import AttemptPolicy, JobAttempt, JobNamespace, JobSpec, settings_for
from airflow_jrs.protocol.steps import observe_steps
from airflow_jrs.store import Attempt
from airflow_jrs.store.redis.namespace import RedisJobNamespace
from jrs_testbench.lossy_proxy import LossyProxy
from jrs_testbench.trials.history import HistoryLog
from jrs_testbench.trials.launcher import StandInLauncher

OK, FAILED, NO_RETRY = 0, 1, 2
#: A deliberately broken protocol, so a test can show the checker fails: ``unfenced_result``
#: removes the fence check from the result script (any holder, even a stale one, may write).
BREAK_ENV = "JRS_TRIALS_BREAK"
FENCE_CHECK_LINE = "if not fence_ok(KEYS[5], ARGV[4]) then return -2 end"


def break_protocol() -> str | None:
    """Apply ``JRS_TRIALS_BREAK`` (before any store is built: the script is registered then)."""
    broken = os.environ.get(BREAK_ENV) or None
    if broken == "unfenced_result":
        from airflow_jrs.store.redis import result_scripts as scripts

        if FENCE_CHECK_LINE not in scripts.CREATE_DIRTY_RESULT:
            raise RuntimeError("CREATE_DIRTY_RESULT changed: update FENCE_CHECK_LINE so the broken protocol breaks")
        scripts.CREATE_DIRTY_RESULT = scripts.CREATE_DIRTY_RESULT.replace(FENCE_CHECK_LINE, "-- fence check removed")
    elif broken is not None:
        raise ValueError(f"{BREAK_ENV}={broken!r}: the only broken protocol is 'unfenced_result'")
    return broken


def jobs_for(spec: dict[str, Any]) -> JobNamespace:
    """The trial's namespace through this process's host's Redis URL (a try's, a cleanup's), with
    ``[jrs] result_documents`` when the run has it on (``spec["result_documents"]``: the folder)."""
    settings = settings_for(
        spec["namespace"], output_root=spec["output_root"], spec_root=spec["spec_root"], lease_ttl=spec["lease_ttl"],
        result_documents=spec.get("result_documents") or "", durability=spec.get("durability") or "none",
    )  # fmt: skip
    return RedisJobNamespace.from_url(spec["url"], settings)


def apply_revert() -> str | None:
    """Apply ``JRS_TRIALS_REVERT`` (one fix patched back out, :mod:`.reverts`) when it is set."""
    if not os.environ.get("JRS_TRIALS_REVERT") or importlib.util.find_spec("jrs_testbench.trials.reverts") is None:
        return None
    from jrs_testbench.trials import reverts  # type: ignore[attr-defined]

    reverts.apply_from_env()
    return os.environ["JRS_TRIALS_REVERT"]


def _record_writes(jobs: JobNamespace, log: HistoryLog, *, pause_before_forget: bool = False,
                   lose_acquire_reply: Callable[[], None] | None = None) -> None:  # fmt: skip
    """Log each result write before it starts (a lower bound) and when acknowledged or refused.
    ``pause_before_forget``: a recompute's forget stops its process (SIGSTOP) after its arguments
    (fence, entry read) were taken and before it reaches Redis; the driver wakes it once another
    try's result was acknowledged (the stale holder's forget that fix 3 of :mod:`.reverts` fences).
    ``lose_acquire_reply``: called once right before the first ACQUIRE, to lose its reply (redis-py
    sends the command again). An ACQUIRE refused is logged as ``lease_held`` with the holder's
    nonce read back and this lease's own: the same nonce means the try waits for itself."""
    store = jobs.results
    create, forget = store.create_dirty_result, store.forget_result

    def create_dirty_result(result: Any, *, fence: Any = None, supersede: Any = False) -> Any:
        status = result.status.value
        log.log("result_write_begin", fence=fence, status=status)
        try:
            entry = create(result, fence=fence, supersede=supersede)
        except Exception as exc:
            log.log("result_refused", fence=fence, status=status, error=f"{type(exc).__name__}: {exc}")
            raise
        log.log("result_written", fence=fence, status=status, outputs=result.outputs)
        return entry

    def forget_result(job_id: str, **kwargs: Any) -> Any:
        log.log("forget_begin", fence=kwargs.get("fence"), reason=str(kwargs.get("reason")))
        if pause_before_forget:  # its fence and the entry it read are taken: the window FORGET is fenced for
            log.log("fault", kind="pause_before_forget")
            os.kill(os.getpid(), signal.SIGSTOP)
        done = forget(job_id, **kwargs)
        log.log("forgotten", fence=kwargs.get("fence"), reason=str(kwargs.get("reason")))
        return done

    store.create_dirty_result = create_dirty_result  # type: ignore[method-assign]
    store.forget_result = forget_result  # type: ignore[method-assign]
    make_lease = jobs.lease

    def lease(job_id: str, **kwargs: Any) -> Any:
        held = make_lease(job_id, **kwargs)
        acquire, take_over = held.acquire, held.take_over

        def logged(how: str, call: Any, *args: Any) -> Any:
            nonlocal lose_acquire_reply
            if how == "acquire" and lose_acquire_reply is not None:
                # the lost reply must be the script's, not a NOSCRIPT
                from airflow_jrs.store.redis import lease_scripts as scripts

                jobs.client.script_load(scripts.ACQUIRE_LEASE)
                log.log("fault", kind="lose_acquire_reply")
                lose_acquire_reply()
                lose_acquire_reply = None
            try:
                token = call(*args)
            except LeaseHeldError:
                with contextlib.suppress(Exception):
                    holder = held.peek()
                    log.log("lease_held", via=how, nonce=held.nonce, holder_nonce=holder and holder.nonce,
                            holder_fence=holder and holder.token)  # fmt: skip
                raise
            if token is not None:
                log.fence = token
                taken = {"from_fence": int(args[0].token)} if how == "takeover" else {}  # the holder it took over
                log.log("lease_acquired", fence=token, via=how, **taken)
                lost = held.on_lost

                def on_lost(lease: Any) -> None:
                    log.log("lease_lost", fence=lease.token)
                    if lost is not None:
                        lost(lease)

                held.on_lost = on_lost
            return token

        held.acquire = lambda: logged("acquire", acquire)
        held.take_over = lambda dead: logged("takeover", take_over, dead)
        return held

    jobs.lease = lease  # type: ignore[method-assign]


#: ``1``: every try runs where ``/proc`` is not mounted (a locked-down container on the same host
#: name): no process of the host can be inspected, no pid space read, so no holder can be proven dead.
NO_PROC_ENV = "JRS_TRIALS_NO_PROC"
CLONE_NEWNS, MS_REC, MS_PRIVATE = 0x00020000, 0x4000, 0x40000


def cover_with_tmpfs(path: str, why: str) -> None:
    """Cover ``path`` with an empty tmpfs in a mount namespace of this process's own (call it
    single-threaded: just forked); what the process starts inherits it, the host's other
    processes keep their view. Needs root (as the hosts do); ``why`` names the fault for the error."""
    libc = ctypes.CDLL(None, use_errno=True)
    for call, args in (("unshare", (CLONE_NEWNS,)), ("mount", (None, b"/", None, MS_REC | MS_PRIVATE, None)),
                       ("mount", (b"none", path.encode(), b"tmpfs", 0, None))):  # fmt: skip
        if getattr(libc, call)(*args) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"{call} failed ({os.strerror(err)}): {why} needs root")


def _hide_proc() -> None:
    """Every try where ``/proc`` is not mounted (a host's ``/proc`` lies over the machine's, so
    unmounting one would show the other: it is covered instead)."""
    cover_with_tmpfs("/proc", NO_PROC_ENV)
    os.mkdir(f"/proc/{os.getpid()}")  # psutil's pid list may not be empty; the folder holds nothing to read


def _db(url: str) -> str:
    return urllib.parse.urlsplit(url).path.strip("/") or "0"


def _own_proxy(spec: dict[str, Any]) -> LossyProxy:
    """A proxy in this process between the try and its host's Redis URL: it can lose exactly the
    reply of the try's ACQUIRE (the host's proxy serves every process of the host)."""
    parts = urllib.parse.urlsplit(spec["url"])
    proxy = LossyProxy(parts.hostname or "127.0.0.1", parts.port or 6379)
    return proxy.__enter__()


def _pause_before_write(log: HistoryLog) -> None:
    """Stop this process between the attempt's last lease check and its result write (the
    window the fence exists for); the trial driver continues it once its lease is surely gone."""
    log.log("fault", kind="pause_before_write")
    os.kill(os.getpid(), signal.SIGSTOP)


def _hold_after_lease(log: HistoryLog, hold: str) -> None:
    """Wait right after taking the lease (its renewal thread runs on) until the driver creates
    ``hold``: meanwhile it deletes the predecessor's heartbeat (``heartbeat_lost_early``)."""
    log.log("hold_after_lease")
    open(hold + ".held", "w").close()
    deadline = time.monotonic() + 60
    while not os.path.exists(hold) and time.monotonic() < deadline:
        time.sleep(0.02)
    log.log("hold_end", released=os.path.exists(hold))


def run_task(spec: dict[str, Any]) -> int:
    """One try as described by ``spec`` (see :mod:`.runner`); returns the exit code."""
    reverted = apply_revert()
    broken = break_protocol()
    if os.environ.get(NO_PROC_ENV) == "1":
        _hide_proc()
    host = spec.get("host", "h1")
    os.environ["JRS_TRIAL_HOST"] = host
    log = HistoryLog(spec["history"], trial=spec["trial"], job=spec["job_id"])
    log.extra["try"] = spec.get("try_id")
    log.log("task_start", try_number=spec["try_number"], run_id=spec["run_id"], task_id=spec["task_id"], host=host,
            last_try=spec["last_try"], crash_at=spec.get("crash_at"), revert=reverted, broken=broken)  # fmt: skip
    crash_at, hold = spec.get("crash_at"), spec.get("hold_after_lease")

    def observer(step: str) -> None:
        nonlocal hold
        log.log("step", step=step)
        if step == "after_lease" and hold:
            _hold_after_lease(log, hold)
            hold = None
        if step == crash_at:
            log.log("crash", step=step)
            os.kill(os.getpid(), signal.SIGKILL)

    observe_steps(observer)
    jobs = jobs_for(spec)
    proxy = _own_proxy(spec) if spec.get("lose_acquire_reply") else None
    if proxy is not None:  # this try's commands go through its own proxy (the supervisor's do not)
        jobs.close()
        jobs = RedisJobNamespace.from_url(f"redis://127.0.0.1:{proxy.port}/{_db(spec['url'])}", jobs.settings)
        jobs.connection = {**(jobs.connection or {}), "port": proxy.target[1]}
    _record_writes(jobs, log, pause_before_forget=bool(spec.get("pause_before_forget")),
                   lose_acquire_reply=proxy.drop_next_reply if proxy is not None else None)  # fmt: skip
    stderr = os.open(spec["stderr"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if spec.get("stderr") else None
    launcher = StandInLauncher(
        jobs.connection or {}, spec["lease_ttl"], history=spec["history"], lock=spec["lock"],
        app_args=[*spec["app_args"], "--trial", str(spec["trial"])], stderr=stderr,
        before_write=functools.partial(_pause_before_write, log) if spec.get("pause_before_write") else None,
    )  # fmt: skip
    policy = AttemptPolicy(
        predecessor=spec["predecessor"], lease_wait_timeout=spec["lease_wait_timeout"], last_try=spec["last_try"],
        retries=spec.get("retries", 0), lease_poll=0.1,
        recompute=recompute.Request(everything=True) if spec.get("recompute") else None,
    )  # fmt: skip
    attempt = JobAttempt(
        jobs,
        JobSpec(spec["job_id"], spec["fingerprint"], {"output": ""}),
        Attempt(spec["dag_id"], spec["task_id"], spec["run_id"], spec["try_number"]),
        launcher,
        policy=policy,
        log=logging.getLogger("jrs_testbench.trials.task"),
    )

    def on_kill(signum: int, _frame: Any) -> None:
        log.log("on_kill", signal=signum)
        attempt.kill()
        raise SystemExit(FAILED)  # Airflow ends the task after on_kill

    signal.signal(signal.SIGTERM, on_kill)
    try:
        outcome = attempt.run()
    except JobEndedOnRequestError as exc:
        log.log("error", kind=type(exc).__name__, message=str(exc), retry=False)
        return NO_RETRY
    except SystemExit:
        log.log("error", kind="killed", message="ended by on_kill", retry=True)
        return FAILED
    except Exception as exc:
        log.log("error", kind=type(exc).__name__, message=str(exc), retry=True)
        return FAILED
    log.log("outcome", kind=outcome.kind, fence=outcome.fence, status=outcome.result.status.value,
            reason=outcome.reason, adopted_from=outcome.adopted_from, outputs=outcome.result.outputs)  # fmt: skip
    return OK


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    return run_task(json.loads(args[0]))


if __name__ == "__main__":
    sys.exit(main())
