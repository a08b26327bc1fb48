"""A real Spark Connect server from the installed pyspark, and what the tests count on it.

Started as ``sbin/start-connect-server.sh`` starts it (``spark-submit --class
org.apache.spark.sql.connect.service.SparkConnectServer``; pyspark 4.x ships the
``spark-connect`` jar in ``jars/``), but in the foreground and in its own process group, so it
is always stopped (SIGTERM to the group, SIGKILL after a grace period), even when a test fails.
Bound to 127.0.0.1: the gRPC port and the Spark UI port are free ports; ``local[2]``, a small
driver heap; event logs on, uncompressed and not rolling (one JSON-lines file).

    with SparkConnectServer(tmp / "connect") as server:
        server.url                   # sc://127.0.0.1:<port>, for SparkSession.builder.remote(...)
        server.remote(session_id)    # sc://127.0.0.1:<port>/;session_id=<uuid>: reattach to a session
        server.startup_seconds       # spawn -> gRPC answers
        server.sessions()            # session ids the server opened (event log)
        server.operations()          # operations it started: session, operation id, tags (event log)
        server.jobs(session_id, tag) # Spark jobs of a session's tagged operations (UI REST /api/v1)
        server.activity()            # {"sessions", "operations", "jobs"}: counts, after a barrier()

Why two server-side views: the event log records Spark Connect's own events
(``SparkListenerConnectSessionStarted`` / ``...OperationStarted``, with the client's tags), so it
counts sessions and operations, including those that started no Spark job; the UI REST API's jobs
carry the tag ``SparkConnect_SessionTag_User_<user>_Session_<session>_Tag_<tag>`` and a live
status (RUNNING, SUCCEEDED, FAILED), so it tells whether a tagged operation's Spark work still
runs. Connect events are posted as "other" listener events, which the event logger flushes one by
one: a reader sees them as soon as the server handled them (tests still poll with a deadline).

Command line (a server to play with until Ctrl-C): ``python -m jrs_testbench.spark_connect``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from jrs_testbench.helpers import free_port

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
SESSION_STARTED = "org.apache.spark.sql.connect.service.SparkListenerConnectSessionStarted"
OPERATION_STARTED = "org.apache.spark.sql.connect.service.SparkListenerConnectOperationStarted"


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def connect_jar() -> Path:
    """The ``spark-connect`` jar pyspark ships; its absence means this pyspark cannot serve Connect."""
    jars = sorted((spark_home() / "jars").glob("spark-connect_*.jar"))
    if not jars:
        raise RuntimeError(
            f"no spark-connect_*.jar in {spark_home() / 'jars'}: install the full pyspark 4.x distribution "
            "(pip install pyspark==4.3.0; pyspark-client alone has no jars), then run ./dev setup"
        )
    return jars[0]


class SparkConnectServer:
    """One Spark Connect server process; ``start``/``stop`` or a ``with`` block."""

    def __init__(
        self,
        work_dir: str | os.PathLike[str],
        *,
        master: str = "local[2]",
        driver_memory: str = "512m",
        conf: Mapping[str, str] | None = None,
    ) -> None:
        self.work_dir = Path(work_dir)
        self.master = master
        self.driver_memory = driver_memory
        self.port = free_port()
        self.ui_port = free_port()
        self.event_log_dir = self.work_dir / "events"
        self.log_path = self.work_dir / "server.log"
        self.conf = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.ui.port": str(self.ui_port),
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": str(self.event_log_dir),
            "spark.eventLog.compress": "false",
            "spark.eventLog.rolling.enabled": "false",
            **(conf or {}),
        }
        self.startup_seconds: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._app_id: str | None = None

    # -- addresses ---------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``sc://127.0.0.1:<port>``: a new session of the client's own choosing."""
        return f"sc://127.0.0.1:{self.port}"

    def remote(self, session_id: str | None = None) -> str:
        """The connection string of ``session_id`` (a UUID4 string): reattach to that session."""
        return self.url if session_id is None else f"{self.url}/;session_id={session_id}"

    @property
    def ui_enabled(self) -> bool:
        """``spark.ui.enabled=false`` in ``conf`` starts a server without a UI: then :meth:`jobs`,
        :meth:`activity` and :meth:`barrier` (the UI REST API's views) cannot be used."""
        return self.conf.get("spark.ui.enabled", "true").strip().lower() != "false"

    @property
    def ui_url(self) -> str:
        return f"http://127.0.0.1:{self.ui_port}"

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    # -- lifecycle ---------------------------------------------------------------------------------

    def command(self) -> list[str]:
        cmd = [str(spark_home() / "bin" / "spark-submit"), "--class", SERVER_CLASS, "--master", self.master]
        cmd += ["--driver-memory", self.driver_memory, "--name", "jrs-spark-connect"]
        for key, value in self.conf.items():
            cmd += ["--conf", f"{key}={value}"]
        return cmd

    def start(self, timeout: float = 300.0) -> SparkConnectServer:
        """Spawn the server and return once its gRPC endpoint answers and its UI lists the application.

        Raises ``RuntimeError`` naming the log when the process exits or does not answer in time
        (the process group is killed first, so nothing is left behind).
        """
        connect_jar()
        self.event_log_dir.mkdir(parents=True, exist_ok=True)
        env = {
            **{k: v for k, v in os.environ.items() if k != "SPARK_HOME"},
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable,
        }
        began = time.monotonic()
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                self.command(), env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        try:
            self._wait(self._answers, timeout, "a gRPC answer")
            if self.ui_enabled:  # without a UI, the gRPC answer is all there is to wait for
                self._wait(lambda: self.application_id() is not None, timeout, "its application in the UI REST API")
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def _answers(self) -> bool:
        """The gRPC channel is ready: an HTTP/2 handshake, no RPC (so no session is opened)."""
        import grpc

        channel = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        try:
            grpc.channel_ready_future(channel).result(timeout=1)
            return True
        except grpc.FutureTimeoutError:
            return False
        finally:
            channel.close()

    def _wait(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while True:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise RuntimeError(
                    f"Spark Connect server exited ({self._proc.returncode}) before {what}; log: {self.log_path}\n"
                    + self.log_tail()
                )
            try:
                if ready():
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"Spark Connect server: no {what} after {timeout}s; log: {self.log_path}")
            time.sleep(0.2)

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self, grace: float = 30.0) -> None:
        """SIGTERM the process group (the server stops its SparkContext), SIGKILL after ``grace``."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, None)):
            if proc.poll() is not None:
                break
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue

    def __enter__(self) -> SparkConnectServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- server-side views -------------------------------------------------------------------------

    def _rest(self, path: str) -> Any:
        with urllib.request.urlopen(f"{self.ui_url}/api/v1/{path}", timeout=10) as resp:
            return json.loads(resp.read())

    def application_id(self) -> str | None:
        if self._app_id is None:
            apps = self._rest("applications")
            self._app_id = apps[0]["id"] if apps else None
        return self._app_id

    def jobs(self, session_id: str | None = None, tag: str | None = None) -> list[dict[str, Any]]:
        """Spark jobs (UI REST ``/jobs``), newest first; only a session's (tagged) operations' when given.

        A Connect operation's jobs carry ``SparkConnect_SessionTag_User_<user>_Session_<sid>_Tag_<tag>``
        for each client tag, and ``SparkConnect_OperationTag_User_<user>_Session_<sid>_Operation_<op>``.
        """
        jobs: list[dict[str, Any]] = self._rest(f"applications/{self.application_id()}/jobs")
        if session_id is not None:
            needle = f"_Session_{session_id}_" + (f"Tag_{tag}" if tag is not None else "")
            jobs = [j for j in jobs if any(needle in t for t in j.get("jobTags", []))]
        return jobs

    def running_jobs(self, session_id: str | None = None, tag: str | None = None) -> list[dict[str, Any]]:
        return [j for j in self.jobs(session_id, tag) if j["status"] == "RUNNING"]

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        """The server application's event log, parsed (only events of ``kind`` when given).

        The file is still being written: a last line without its newline is not read yet.
        """
        events = []
        for path in sorted(self.event_log_dir.iterdir()):
            if path.name.startswith("."):
                continue
            text = path.read_text(errors="replace")
            for line in text.splitlines(keepends=True):
                if not line.endswith("\n"):
                    break
                event = json.loads(line)
                if kind is None or event.get("Event") == kind:
                    events.append(event)
        return events

    def sessions(self) -> list[str]:
        """Ids of every session the server opened, in order (its Connect ``SessionStarted`` events)."""
        return [e["sessionId"] for e in self.events(SESSION_STARTED)]

    def operations(self, session_id: str | None = None) -> list[dict[str, Any]]:
        """Operations the server started: ``{"session_id", "operation_id", "tags", "statement"}``."""
        ops = [
            {
                "session_id": e["sessionId"],
                "operation_id": e["operationId"],
                "tags": list(e.get("sparkSessionTags", [])),
                "statement": e.get("statementText", ""),
            }
            for e in self.events(OPERATION_STARTED)
        ]
        return [o for o in ops if session_id is None or o["session_id"] == session_id]

    def activity(self, exclude_sessions: Collection[str] = ()) -> dict[str, int]:
        """How much the server did: sessions opened, operations started, Spark jobs run.

        Sessions in ``exclude_sessions`` (a :meth:`barrier`'s) and their work are not counted.
        Compare two snapshots around the code under test, with a :meth:`barrier` before the
        second one, to prove it opened no session and started no Spark work.
        """
        skip = set(exclude_sessions)
        jobs = [
            j for j in self.jobs() if not any(f"_Session_{sid}_" in tag for sid in skip for tag in j.get("jobTags", []))
        ]
        return {
            "sessions": len([s for s in self.sessions() if s not in skip]),
            "operations": len([o for o in self.operations() if o["session_id"] not in skip]),
            "jobs": len(jobs),
        }

    def barrier(self, timeout: float = 120.0) -> str:
        """Run one tagged operation in a new session and wait until the event log and the UI show it.

        The event log and the UI's job list are each fed by their own listener-bus queue, each in
        event order: once the barrier's operation and job are visible in both, whatever the server
        did before is visible too, so an absence observed after the barrier is an absence, not a
        delay. Returns
        the barrier's session id (pass it to :meth:`activity` as ``exclude_sessions``).
        """
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.remote(self.url).create()
        try:
            spark.addTag("jrs-barrier")
            spark.range(1).count()
            session_id = str(spark.session_id)
        finally:
            spark.stop()
        deadline = time.monotonic() + timeout
        while not (self.operations(session_id) and self.jobs(session_id, "jrs-barrier")):
            if time.monotonic() > deadline:
                raise RuntimeError(f"barrier session {session_id} not visible after {timeout}s; log: {self.log_path}")
            time.sleep(0.05)
        return session_id


if __name__ == "__main__":
    import tempfile

    with SparkConnectServer(tempfile.mkdtemp(prefix="jrs-connect-")) as server:
        print(f"Spark Connect at {server.url} (UI {server.ui_url}), up in {server.startup_seconds:.1f}s")
        print("Ctrl-C stops it.", flush=True)
        try:
            while True:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
