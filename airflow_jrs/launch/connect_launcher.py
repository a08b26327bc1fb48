"""A Spark Connect session as the protocol's launcher (``@task.jrs_pyspark`` on a ``spark_connect`` connection).

With Spark Connect the driver is a long-running server and the task process a thin client, so
the lease alone is not enough, unlike :mod:`.session_launcher`: a task process that dies (SIGKILL,
a lost worker) leaves its query running on the server, for minutes (until the server's detached
timeout), and a retry must never run beside it. What the server offers for that, proved on a
real server by the project's Spark Connect tests:

* a session is a UUID the *client* picks. :class:`ConnectLauncher` picks it before the launch and
  records it in the job's intent (:attr:`airflow_jrs.store.intents.Intent.session_id`), before the
  session exists on the server (intent before side effect);
* the operations the attempt starts from the calling thread carry a tag naming the job and fence
  (:func:`job_tag`), for people reading the Spark UI. Tags are per client thread, so what the
  function starts from threads of its own carries none: interrupts reach the whole session
  (:func:`interrupt_session`), which is the attempt's alone;
* only a client of the SAME session reaches its operations: a successor reattaches with
  ``sc://host:port/;session_id=<id>`` and asks the server (``GetStatus``) whether the session
  still runs an operation, or interrupts it (``predecessor="stop"``). It closes its channel
  and never releases the predecessor's session (``spark.stop()`` would, interrupting it);
* only the server that holds the session can answer for it, so the successor first checks that its
  connection names the server the predecessor's spec records, and fails closed when not
  (:mod:`.connect_server`);
* ``INVALID_HANDLE.SESSION_NOT_FOUND`` / ``SESSION_CLOSED`` from that server: no operation of the
  predecessor runs, and none can start (released or expired);
* an operation ends (CANCELLED) before its Spark tasks do: the executor kills them afterwards, and
  a task blocked in I/O runs until the I/O returns. The server's Spark UI (REST API) shows a
  session's jobs with their active tasks, so a successor, and a stopped attempt before it lets
  its lease go, waits until none is left (:mod:`.connect_tasks`). A server that cannot show them
  fails the attempt closed, unless the session is gone: then a successor waits
  ``[jrs] connect_unseen_tasks_wait`` and goes ahead.

A committed job builds no client at all (the protocol decides before :meth:`prepare`): an unused
Connect client still opens its session at process exit (pyspark's ``atexit`` ML-cache cleanup).
The attempt's own session is released when it ends, and on a kill or a lost lease
(:meth:`ConnectLauncher.stop`: interrupt the session, then release, so no further operation can start),
unless an operation still runs in it after the interrupt (:meth:`ConnectLauncher._release`).
"""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.launch.connect_server import (
    SESSION_GONE,
    SESSION_RUNNING,
    check_same_server,
    interrupt_session,
    session_running,
    session_state,
)
from airflow_jrs.launch.connect_tasks import (
    TASKS_POLL,
    UI_CONF,
    UNSEEN_TASKS_KEY,
    LingeringTasks,
    ServerUi,
    TasksUnknown,
    proceeds_unseen,
    server_ui,
    ui_from,
    unseen_tasks_wait,
)
from airflow_jrs.launch.session_launcher import SessionLauncher, metrics_of
from airflow_jrs.protocol.launcher import RUNS, Ended, Launch, Predecessor
from airflow_jrs.settings import BY_NAME
from airflow_jrs.spark.commit import is_connect_session, write_commit_marker
from airflow_jrs.spark.conf import job_conf

if TYPE_CHECKING:
    from airflow_jrs.store.intents import Intent

#: Conf the Connect builder cannot apply to a running session (and the provider sets for classic ones).
NOT_SESSION_CONF = ("spark.remote", "spark.master", "spark.app.name")
#: What pyspark.sql.functions reads to build Connect columns instead of classic ones.
CONNECT_MODE = "SPARK_CONNECT_MODE_ENABLED"


@contextmanager
def connect_mode() -> Iterator[None]:
    """While the function runs, ``pyspark.sql.functions`` (``F.col``, ``F.lit``, ...) must build
    Connect columns: they choose by ``SPARK_CONNECT_MODE_ENABLED`` in ``os.environ``, which the
    launcher's builder does not set (pyspark.sql's would, for good). Put back afterwards, so a
    later spark-submit from this process does not inherit it."""
    saved = os.environ.get(CONNECT_MODE)
    os.environ[CONNECT_MODE] = "1"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(CONNECT_MODE, None)
        else:
            os.environ[CONNECT_MODE] = saved


def job_tag(namespace: str, job_id: str, fence: int) -> str:
    """The tag on every operation of one attempt: ``jrs-<ns>-<job>-f<fence>`` (Spark refuses a
    tag with a comma, so commas become ``_``)."""
    return re.sub(r",", "_", f"jrs-{namespace}-{job_id}-f{int(fence)}")


def session_url(url: str, session_id: str) -> str:
    """``url`` (``sc://host:port[/;params]``) with ``session_id=<id>`` added to its parameters."""
    base, _, params = url.partition("/;")
    kept = [p for p in params.split(";") if p]
    return f"{base.rstrip('/')}/;" + ";".join([*kept, f"session_id={session_id}"])


def redacted(url: str) -> str:
    """``url`` without its ``token=`` parameter: what the spec and the logs may keep."""
    return re.sub(r"(;|/;)token=[^;]*", r"\1token=***", url)


class ConnectLauncher(SessionLauncher):
    """One attempt's Spark Connect session: open (under a recorded id), tag, call, commit marker, release.

    The operator hands it every attempt: when the settings (resolved at launch only, so a
    committed job looks up no connection) name no ``sc://`` URL, it is the in-process
    :class:`SessionLauncher` it extends."""

    name = "spark connect"

    def __init__(self, *args: Any, unseen_tasks_wait: float | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: ``[jrs] connect_unseen_tasks_wait``: how long a successor waits for a gone session's unseen tasks
        self.unseen_tasks_wait = BY_NAME["connect_unseen_tasks_wait"].default if unseen_tasks_wait is None else (
            unseen_tasks_wait
        )  # fmt: skip
        self.session_id: str | None = None
        self.tag: str | None = None
        self._ui: ServerUi | None = None  # the server's Spark UI, read from the attempt's session
        self._ui_missing = "the attempt's session never started"
        #: why Spark tasks of the attempt's interrupted work may still run on the server
        #: (:meth:`_end_work`): then the attempt records no result and its intent stays
        self._lingering: str | None = None

    def _remote(self) -> bool:
        """Is the session remote? Resolves the settings once (a connection look-up)."""
        if self._resolved is None:
            self._resolved = self.settings()
        return self._resolved[0].startswith("sc://")

    def prepare(self, launch: Launch) -> dict[str, Any]:
        self._resolved = None  # resolved anew for each launch, like the session launcher's
        if not self._remote():
            return super().prepare(launch)
        assert self._resolved is not None
        url, conf = self._resolved
        self._lingering = None
        proceeds_unseen(conf)  # a typo in the opt-out fails here, before anything runs
        if "session_id=" in url:
            raise JrsConfigError(
                f"job {launch.job_id}: the Spark Connect URL {redacted(url)} names a session_id; each attempt "
                "opens a session of its own (recorded in the intent so that a retry can reach it). Remove "
                "session_id from the connection."
            )
        self.session_id = str(uuid.uuid4())
        self.tag = job_tag(launch.namespace, launch.job_id, launch.fence)
        return {
            "launcher": "spark-connect", "callable": self.callable_name, "remote": redacted(url),
            "conf": conf, "session_id": self.session_id, "tag": self.tag,
        }  # fmt: skip

    def run(self, launch: Launch) -> None:
        if not self._remote():
            return super().run(launch)
        from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

        assert self._resolved is not None
        url, conf = self._resolved
        assert self.session_id is not None and self.tag is not None, "prepare() picks the session id"
        with self._lock:
            if self._stopped:  # killed or lost the lease before the session existed
                raise RuntimeError(f"job {launch.job_id}: stopped before the session started")
            # the builder of pyspark.sql.connect, not pyspark.sql's: that one sets SPARK_REMOTE and
            # SPARK_CONNECT_MODE_ENABLED in os.environ, which every later spark-submit would inherit
            spark = RemoteSparkSession.builder.remote(session_url(url, self.session_id)).create()
            self._session = spark
        self.log.info(
            "Job %s: Spark Connect session %s on %s, operations tagged %s.",
            launch.job_id, self.session_id, redacted(url), self.tag,
        )  # fmt: skip
        self._read_ui(spark, url)
        done = self._start_self_fence(launch)
        ended = False
        try:
            settings = {k: v for k, v in conf.items() if k not in NOT_SESSION_CONF and k != UNSEEN_TASKS_KEY}
            fenced = job_conf(job_id=launch.job_id, namespace=launch.namespace, fence=launch.fence,
                              output_dir=launch.staging)  # fmt: skip
            for key, value in {**settings, **fenced}.items():
                spark.conf.set(key, str(value))  # runtime conf only: a static key fails here, naming itself
            spark.addTag(self.tag)
            with self._lock:
                if self._stopped:
                    raise RuntimeError(f"job {launch.job_id}: stopped while the session started")
            with connect_mode():
                metrics = metrics_of(self.call(spark, self.context(launch)), self.log)
            with self._lock:
                if self._stopped:  # a function that swallowed the interrupt: its output is not complete
                    raise RuntimeError(f"job {launch.job_id}: stopped before its commit marker was written")
                self._marker_folder(launch.staging)
                # LAST: the marker vouches for every byte the function wrote (spark/commit.py).
                write_commit_marker(spark, launch.staging, metrics)
            ended = True
        finally:
            done.set()
            with self._lock:
                self._session = None
            if not ended:  # failed or stopped: nothing of the attempt may outlive it on the server
                self._end_work(launch.job_id)
            self._release(spark)

    def _read_ui(self, spark: Any, url: str) -> None:
        """Where the server shows this session's Spark tasks (:meth:`_end_work` waits for them)."""
        try:
            self._ui = ui_from({key: spark.conf.get(key, default) for key, default in UI_CONF.items()}, url)
            self._ui_missing = "the server runs no Spark UI (spark.ui.enabled=false)"
        except Exception as exc:
            self._ui, self._ui_missing = None, f"could not read its Spark UI address ({exc})"

    def _end_work(self, job_id: str) -> None:
        """Interrupt whatever still runs in the session (threads of the function included), then
        wait until its Spark tasks are gone from the server, while the lease is renewed: the
        attempt's failure is recorded and its lease released only afterwards, so a retry never
        starts beside a cancelled job's tasks. When they have not ended within the bound, or the
        server's UI cannot show them (and the connection did not opt out), the attempt fails
        closed: :meth:`outcome` answers "runs", so it records no result and its intent (naming
        the session) stays, and the retry waits for those tasks before it launches. Never raises
        (the attempt already fails with its own error)."""
        assert self._resolved is not None and self.session_id is not None
        try:  # on a client of its own: stop() may have closed the session's channel already
            interrupt_session(session_url(self._resolved[0], self.session_id))
        except Exception as exc:
            self.log.warning("Could not interrupt the Spark Connect session %s: %s", self.session_id, exc)
        lingering = LingeringTasks(
            self._ui, self.session_id, self.log, missing=self._ui_missing, proceed=proceeds_unseen(self._resolved[1])
        )
        try:
            while lingering.running():
                time.sleep(TASKS_POLL)
        except RuntimeError as exc:  # TasksUnknown included
            self._lingering = str(exc)
            self.log.error(
                "Job %s: %s The attempt records no result and its intent stays, so the next attempt waits for "
                "those tasks (or interrupts them again) before it starts.", job_id, exc,
            )  # fmt: skip

    def outcome(self, launch: Launch, recorder: Any, *, failed: bool) -> Ended:
        """ "Runs" while Spark tasks of the attempt's interrupted work may still run on the server
        (:meth:`_end_work`): the failure is not recorded and the intent stays, which is what makes
        the next attempt wait for them (:meth:`predecessors_of`) instead of computing beside them."""
        if failed and self._lingering is not None and self._remote():
            return Ended(RUNS, f"session {self.session_id}", lingering=self._lingering)
        return Ended()

    def _marker_folder(self, staging: str) -> None:
        """The client writes the marker: its folder must exist here. A function that wrote nothing
        under ``jrs.output`` leaves none; one that wrote through the server where this worker does
        not see it is the misconfiguration to name (the marker would vouch for unseen data)."""
        local = staging[len("file://") :] if staging.startswith("file://") else staging
        if "://" in local or os.path.isdir(local):
            return
        self.log.warning(
            "The output folder %s does not exist on this worker; creating it for the commit marker. If the "
            "function wrote data there through the Spark Connect server, the server and this worker do not "
            "share that path: put the output root on storage both see (shared disk, NFS, a mounted bucket).",
            staging,
        )
        os.makedirs(local, exist_ok=True)

    def predecessors_of(self, namespace: str, stale: Intent) -> list[Predecessor]:
        """The predecessor's Connect session while it still runs an operation or Spark tasks; a
        predecessor that recorded no session (it ran with another launcher) is looked for as a
        local driver.

        Only on the server the predecessor's spec records (:func:`.connect_server.check_same_server`:
        a mismatch fails closed). Tasks the server's UI cannot show fail the attempt closed
        (:class:`.connect_tasks.TasksUnknown`), unless the session is gone: then the successor waits
        ``[jrs] connect_unseen_tasks_wait`` for them and goes ahead (:func:`.connect_tasks.unseen_tasks_wait`)."""
        if not stale.session_id or not self._remote():
            return super().predecessors_of(namespace, stale)
        assert self._resolved is not None
        url, conf = self._resolved
        check_same_server(namespace, stale, url, self.log)  # any other server answers "not found"
        remote = session_url(url, stale.session_id)
        state = session_state(remote)
        try:
            ui, missing = server_ui(url), "the server runs no Spark UI (spark.ui.enabled=false)"
        except Exception as exc:
            ui, missing = None, f"could not read its Spark UI address ({exc})"
        lingering = LingeringTasks(ui, stale.session_id, self.log, missing=missing, proceed=proceeds_unseen(conf))
        if state != SESSION_RUNNING:
            try:
                if not lingering.running():
                    return []
            except TasksUnknown as exc:
                if state != SESSION_GONE:  # an idle session: a live client of it may still start an operation
                    raise
                return [unseen_tasks_wait(stale.session_id, exc.why, self.unseen_tasks_wait, self.log)]
        tag = job_tag(namespace, stale.job_id, stale.fence)

        def stop() -> None:
            interrupted = interrupt_session(remote)  # all of it: the function's own threads' work carries no tag
            self.log.warning("Interrupted the predecessor's operations %s (session %s).", interrupted, stale.session_id)

        def alive() -> bool:  # its operations, then the Spark tasks they leave behind
            return session_running(remote) or lingering.running()

        description = f"Spark Connect session {stale.session_id} (tag {tag}) on {redacted(url)}"
        return [Predecessor(description=description, alive=alive, stop=stop)]

    def stop(self) -> None:
        """Interrupt every operation of the attempt's session (those the function started from
        threads of its own carry no tag), then release it (no further operation can start in it).
        From a signal handler or the lease renewer's thread, on RPCs of their own. Never raises;
        :meth:`run` then waits for the interrupted jobs' tasks (:meth:`_end_work`)."""
        with self._lock:
            spark = self._session
            remote = spark is not None and is_connect_session(spark)
            if remote:
                self._stopped = True
        if not remote:
            return super().stop()  # nothing runs yet (it marks the launcher stopped), or an in-process session
        try:
            spark.interruptAll()
        except Exception as exc:
            self.log.warning("Could not interrupt the Spark Connect session %s: %s", self.session_id, exc)
        try:
            self._release(spark)
        except Exception as exc:
            self.log.warning("Could not release the Spark Connect session %s: %s", self.session_id, exc)

    def _release(self, spark: Any) -> None:
        """Release the session (no further operation can start in it), unless it still runs an
        operation: an interrupt does not always take (an operation between its analysis and its
        first Spark job runs on to its end, seen in the fault trials), and a released session hides
        it from a successor (GetStatus answers SESSION_CLOSED, read as "nothing runs"), which would
        then compute beside it. Kept, the session shows the operation running, so the successor
        waits for it or interrupts it again; the server drops the idle session after its timeout."""
        try:
            assert self._resolved is not None and self.session_id is not None
            busy = session_running(session_url(self._resolved[0], self.session_id))
        except Exception as exc:  # unknown is not "no"
            busy, why = True, f"could not ask the server ({exc})"
        else:
            why = "an interrupted operation still runs in it"
        if busy:
            self.log.warning(
                "Spark Connect session %s not released: %s. It stays open so that a retry sees the operation "
                "and waits for it; the server closes it once it has been idle for its session timeout.",
                self.session_id, why,
            )  # fmt: skip
            spark.release_session_on_close = False
        spark.stop()
