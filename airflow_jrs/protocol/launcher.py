"""Where an attempt's application runs: the one interface between the protocol and Spark.

The protocol (:mod:`.attempt`) decides, leases, recovers, records the intent and the result;
a :class:`Launcher` runs the application and answers what only the place it runs can answer:
is a predecessor's application still alive, what did the launch report, did a cluster driver
outlive its client. It answers with facts (:class:`Ended`, :class:`Failure`: an application id,
an exit code, the error); the protocol decides from them and words every message
(:mod:`.endings`). A stream is a wrapper around a launcher
(:class:`airflow_jrs.launch.streaming.StreamingLauncher`), not methods of every launcher.
spark-submit in each deploy mode is one launcher
(:class:`airflow_jrs.launch.spark_launcher.SparkSubmitLauncher`); the fault trials use a
stand-in (:mod:`jrs_testbench.trials`), so thousands of trials run this very protocol code.

Every method but :meth:`Launcher.run` must return promptly; :meth:`Launcher.kill` and
:meth:`Launcher.stop` never raise: they run from signal handlers and the lease renewer's thread.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

from airflow_jrs.protocol.processes import find_job_processes, process_alive

if TYPE_CHECKING:
    from airflow_jrs.protocol.run import JobRun
    from airflow_jrs.store import JobResult
    from airflow_jrs.store.intents import Intent

#: What an attempt may conclude once its launch ended (:meth:`Launcher.outcome`).
ENDED, RUNS, COMMITTED = "ended", "runs", "committed"


class Ended(NamedTuple):
    """What the end of a launch lets the attempt conclude (:meth:`Launcher.outcome`): facts, which
    the protocol words (:func:`.endings.still_runs`). A plain ``(state, application_id)`` tuple
    is one too."""

    #: :data:`ENDED` (the launch's exit is its outcome), :data:`RUNS` (something of it may still
    #: run: the intent stays, nothing is recorded) or :data:`COMMITTED` (a cluster driver ended
    #: with this attempt's complete commit marker)
    state: str = ENDED
    #: the application, driver or session that may still run
    application_id: str | None = None
    #: what still runs on a server that is no cluster driver, and why (Spark Connect: tasks of the
    #: attempt's interrupted work the server could not end); ``None``: the application itself
    lingering: str | None = None


@dataclass(frozen=True)
class Failure:
    """What is known of a failed run (:meth:`Launcher.failure`): the protocol words the FAILED
    result and the log line from it (:func:`.endings.failure_summary`)."""

    error: BaseException
    #: what failed ("spark-submit", "spark-pipelines"); ``None``: the error names it itself
    process: str | None = "the application"
    exit_code: int | None = None
    application_id: str | None = None
    #: the end of the process's output, when the launcher keeps it (``None``: it does not)
    output: str | None = None


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
    #: the application outlives its client (cluster deploy modes): its exit says little, and
    #: only a commit marker of this attempt makes it a success
    cluster = False
    #: the application runs until stopped and keeps its folder across attempts (a stream:
    #: :class:`airflow_jrs.launch.streaming.StreamingLauncher`); it writes no commit marker
    streaming = False

    def prepare(self, launch: Launch) -> dict[str, Any]:
        """Build the launch (command, conf) before the intent is recorded; returns the spec the
        state backend keeps for it (what was submitted: application, arguments, conf). A launch in
        a Spark Connect session names it (``session_id``): the intent records it for a successor."""
        raise NotImplementedError

    def run(self, launch: Launch) -> None:
        """Run the application; return when it ended well, raise when it failed or was ended."""
        raise NotImplementedError

    def submission(self) -> tuple[int | None, str | None]:
        """(launched pid, application or driver id) as known so far (recorded in the intent)."""
        return None, None

    def stop(self) -> None:
        """Kill what :meth:`run` started (the lease was lost). Never raises."""

    def kill(self, run: JobRun | None, fence: int | None, *, by: str = "on_kill") -> None:
        """End the application at once. From ``on_kill`` (``run`` and ``fence`` given): through the
        one stop path first where there is one, so the request says who asked, then :meth:`stop`.
        Interrupted inside :meth:`run` (``run=None``, ``by="execution_timeout"``): no request, just
        stop. Never raises."""
        self.stop()

    def predecessors_of(self, namespace: str, stale: Intent) -> list[Predecessor]:
        """Live applications of the attempt whose intent ``stale`` is (it recorded an application id,
        a session). Raise when it cannot be known: unknown is not "none". Default: the job's
        launches on this host, by their command line (:func:`local_predecessors`)."""
        return local_predecessors(namespace, stale.job_id)

    def before_resubmit(self, stale: Intent) -> None:
        """Raise when a predecessor's application may run unseen and a new launch could run beside it."""

    def outcome(self, launch: Launch, recorder: Any, *, failed: bool) -> Ended:
        """After :meth:`run` returned or raised: what may be concluded (:class:`Ended`). Only
        launchers whose work outlives the launch answer anything but :data:`ENDED`."""
        return Ended()

    def failure(self, error: BaseException) -> Failure:
        """What is known of a failed run (the protocol words the FAILED result from it)."""
        return Failure(error, application_id=self.submission()[1])

    def check_ended_on_request(self, launch: Launch, recorder: Any) -> None:
        """After a failed run: if it ended on a stop or cancel request, record the outcome and
        raise :class:`~airflow_jrs.exceptions.JobEndedOnRequestError` (no retry must undo it).
        The attempt asks only when no commit marker of its own was there; a launcher whose
        application may still commit while it is being stopped (a cluster driver) returns without
        recording when it did, and :meth:`outcome` then says :data:`COMMITTED`."""
        from airflow_jrs.protocol.stopping import asked_to_end, end_on_request

        asked = asked_to_end(launch.run, launch.fence)
        if asked is not None:
            end_on_request(launch.run, launch.fence, asked)

    def finish(self, launch: Launch, result: JobResult) -> JobResult:
        """The SUCCEEDED result to record once the run ended well (a launcher adds what it knows:
        metrics, a stream's checkpoint); raise to record nothing (a stream stopped on request
        records STOPPED and raises)."""
        return result
