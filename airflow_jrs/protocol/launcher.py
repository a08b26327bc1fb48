"""Where an attempt's application runs: the one interface between the protocol and Spark.

The protocol (:mod:`.attempt`) decides, leases, recovers, records the intent and the result;
a :class:`Launcher` runs the application and answers what only the place it runs can answer:
is a predecessor's application still alive, what did the launch report, did a cluster driver
outlive its client. spark-submit in each deploy mode is one launcher
(:class:`airflow_jrs.launch.spark_launcher.SparkSubmitLauncher`); the fault trials use a
stand-in (:mod:`jrs_testbench.trials`), so thousands of trials run this very protocol code.

Every method but :meth:`Launcher.run` must return promptly and never raise from
:meth:`Launcher.kill` or :meth:`Launcher.stop`: they run from signal handlers and the lease
renewer's thread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from airflow_jrs.protocol.processes import find_job_processes, process_alive

if TYPE_CHECKING:
    from airflow_jrs.protocol.run import JobRun
    from airflow_jrs.store import JobResult
    from airflow_jrs.store.intents import Intent

#: What an attempt may conclude once its launch ended (:meth:`Launcher.outcome`).
ENDED, RUNS, COMMITTED = "ended", "runs", "committed"


@dataclass
class Predecessor:
    """A live application of an earlier attempt: how to see it, whether it lives, how to stop it."""

    description: str
    alive: Callable[[], bool]
    stop: Callable[[], None]


def local_predecessors(namespace: str, job_id: str) -> list[Predecessor]:
    """This job's launches that outlived their attempt on this host (any fence): stopped with
    SIGTERM, which the supervisor relays to what it launched."""
    return [
        Predecessor(description=f"local launch pid {proc.pid}", alive=partial(process_alive, proc), stop=proc.terminate)
        for proc in find_job_processes(namespace, job_id)
    ]


@dataclass(frozen=True)
class Launch:
    """One launch of a job's application, under one fence."""

    run: JobRun
    fence: int
    #: where the application writes (a fenced staging folder; a stream's stable folder)
    staging: str
    #: the Spark application name (``jrs-<ns>-<job>-f<token>``)
    app_name: str

    @property
    def job_id(self) -> str:
        return self.run.job_id

    @property
    def namespace(self) -> str:
        return self.run.jobs.namespace


class Launcher:
    """Runs one attempt's application. Defaults describe a local process that is its own
    application (its exit is the outcome, a predecessor is a local process)."""

    #: a name for messages ("local", "yarn", "standalone", "stand-in", ...)
    name = "local"
    #: the application outlives its client (cluster deploy modes): its exit says little
    cluster = False
    #: the application runs until stopped and keeps its folder across attempts (streams)
    streaming = False

    def staging(self, fenced: str) -> str:
        """Where this launch writes, given the fenced staging folder the protocol chose."""
        return fenced

    def prepare(self, launch: Launch) -> dict[str, Any]:
        """Build the launch (command, conf) before the intent is recorded; returns the spec the
        state backend keeps for it (what was submitted: application, arguments, conf)."""
        raise NotImplementedError

    def run(self, launch: Launch) -> None:
        """Run the application; return when it ended well, raise when it failed or was ended."""
        raise NotImplementedError

    def submission(self) -> tuple[int | None, str | None]:
        """(launched pid, application or driver id) as known so far (recorded in the intent)."""
        return None, None

    def alive(self) -> bool:
        """Does what :meth:`run` started still run?"""
        return False

    def stop(self) -> None:
        """Kill what :meth:`run` started (the lease was lost). Never raises."""

    def kill(self, run: JobRun | None, fence: int | None) -> None:
        """The task is being killed (``on_kill``): end the application through the one stop path
        first where there is one, then :meth:`stop`. Never raises."""
        self.stop()

    def interrupted(self) -> None:
        """The task was interrupted inside :meth:`run` (a timeout): stop what runs, at once."""
        self.stop()

    def find_predecessors(self, namespace: str, job_id: str, known_ids: Sequence[str]) -> list[Predecessor]:
        """Live applications of earlier attempts of this job (``known_ids``: ids their intents
        recorded). Raise when it cannot be known: unknown is not "none". Default: the job's
        launches on this host, by their command line (:func:`local_predecessors`)."""
        return local_predecessors(namespace, job_id)

    def predecessors_of(self, namespace: str, stale: Intent) -> list[Predecessor]:
        """Live applications of the attempt whose intent ``stale`` is: by default
        :meth:`find_predecessors` with the application id it recorded. A launcher that records
        more in the intent (:meth:`intent_fields`: a Spark Connect session) looks there."""
        known = [stale.application_id] if stale.application_id else []
        return self.find_predecessors(namespace, stale.job_id, known)

    def intent_fields(self) -> dict[str, Any]:
        """Fields of :class:`~airflow_jrs.store.intents.Intent` this launch fills in before it runs
        (after :meth:`prepare`), for a successor's :meth:`predecessors_of`."""
        return {}

    def before_resubmit(self, stale: Intent) -> None:
        """Raise when a predecessor's application may run unseen and a new launch could run beside it."""

    def outcome(self, launch: Launch, recorder: Any, *, failed: bool) -> tuple[str, str | None]:
        """After :meth:`run` returned or raised: (:data:`ENDED`, :data:`RUNS` or :data:`COMMITTED`,
        application id). Only cluster launchers answer anything but ``ENDED``."""
        return ENDED, None

    def check_ended_on_request(self, launch: Launch, recorder: Any) -> None:
        """After a failed run: if it ended on a stop or cancel request, record the outcome and
        raise :class:`~airflow_jrs.exceptions.JobEndedOnRequestError` (no retry must undo it)."""
        from airflow_jrs.protocol.stopping import asked_to_end, end_on_request

        asked = asked_to_end(launch.run, launch.fence)
        if asked is not None:
            end_on_request(launch.run, launch.fence, asked)

    def still_runs(self, launch: Launch, app_id: str | None, *, last_try: bool) -> str:
        """What the attempt says when its driver may still run (cluster launchers only)."""
        return f"job {launch.job_id}: the application {app_id or ''} may still run; the intent stays"

    def missing_marker(self, launch: Launch, app_id: str | None) -> str:
        """What the attempt says when a cluster driver ended without a complete commit marker."""
        return f"job {launch.job_id}: the application {app_id or ''} ended without a complete commit marker"

    def failure(self, error: BaseException) -> tuple[str, str | None]:
        """(what the FAILED result and the log say, application id) for a failed run."""
        return f"the application failed: {error}", self.submission()[1]

    def after_run(self, launch: Launch) -> None:
        """After a run that ended well and before the result: raise to record nothing (a stream
        that was stopped on request records STOPPED here)."""

    def read_marker(self, staging: str) -> dict[str, Any] | None:
        """The commit marker the application left (``None``: none, or not applicable)."""
        from airflow_jrs.spark.commit import read_commit_marker

        return read_commit_marker(staging)

    def finish(self, result: JobResult) -> JobResult:
        """The SUCCEEDED result to record (a stream adds what it stopped at)."""
        return result
