"""Spark Connect: the Spark tasks a cancelled operation leaves running on the server.

The server reports an interrupted operation ended (CANCELLED, its job ``FAILED``) at once, while
the executor kills the job's tasks afterwards: a task between two rows stops within a moment, one
blocked in I/O (a script's pipe, a slow read) or in code that swallows the interrupt (``reflect``
of ``Thread.sleep`` returns null and goes on to its next row) runs on for seconds or minutes. A
successor that went ahead on the operation's end would compute beside them. What shows them is the
server's Spark UI: its REST API lists the jobs of a session (their tags name it, tagged or not)
with their status and active tasks. :class:`LingeringTasks` waits on that, bounded, for
:class:`~airflow_jrs.launch.connect_launcher.ConnectLauncher` (a successor's predecessor check,
and a stopped attempt before it lets its lease go).
"""

from __future__ import annotations

import json
import time
import urllib.request
from dataclasses import dataclass
from typing import Any

#: Seconds the Spark tasks of a session whose operations ended may run on before a successor (or
#: the stopped attempt itself) gives up waiting for them (:class:`LingeringTasks`).
TASKS_TIMEOUT = 120.0
#: Seconds between two looks at the server's UI while waiting for those tasks.
TASKS_POLL = 0.25


def _conf_values(client: Any, defaults: dict[str, str]) -> dict[str, str]:
    """Values of the server's conf (``GetWithDefault``: an unset key reads as its default)."""
    from pyspark.sql.connect import proto

    pairs = [proto.KeyValue(key=k, value=v) for k, v in defaults.items()]
    result = client.config(
        proto.ConfigRequest.Operation(get_with_default=proto.ConfigRequest.GetWithDefault(pairs=pairs))
    )
    return {k: v for k, v in result.pairs}


def ui_from(conf: dict[str, str], url: str) -> ServerUi | None:
    """The server's UI, from its conf and the host of the Connect URL (the server is the driver)."""
    if conf.get("spark.ui.enabled", "true").lower() == "false":
        return None
    host = url[len("sc://") :].split("/", 1)[0].rsplit(":", 1)[0]
    return ServerUi(f"http://{host}:{conf.get('spark.ui.port') or '4040'}", conf.get("spark.app.id") or "")


UI_CONF = {"spark.ui.enabled": "true", "spark.ui.port": "4040", "spark.app.id": ""}


def server_ui(url: str) -> ServerUi | None:
    """The Spark UI of the Connect server of ``url`` (``sc://host:port``, no session), or ``None``
    when it runs none. Asked in a session of its own, released at once (a successor has no live
    session to ask: the predecessor's may be released already)."""
    from pyspark.sql.connect.client import SparkConnectClient

    client = SparkConnectClient(connection=url)  # a session id of its own
    try:
        return ui_from(_conf_values(client, UI_CONF), url)
    finally:
        try:
            client.release_session()
        finally:
            client.close()


@dataclass(frozen=True)
class ServerUi:
    """The Connect server's Spark UI: its REST API shows a session's Spark jobs and their tasks."""

    url: str
    app_id: str

    def session_tasks(self, session_id: str) -> int:
        """Spark tasks still running for the session's jobs: a cancelled job ends (``JobEnd``, its
        operation CANCELLED) while its tasks run on until the executor has killed them, seconds
        later (a task blocked in I/O runs until the I/O returns). A job still RUNNING counts one.
        The jobs of a session carry ``..._Session_<id>_...`` in their tags, tagged or not."""
        app_id = self.app_id or self._rest("applications")[0]["id"]  # the server is one application
        jobs = self._rest(f"applications/{app_id}/jobs")
        needle = f"_Session_{session_id}_"
        mine = [j for j in jobs if any(needle in t for t in j.get("jobTags", []))]
        return sum(max(int(j.get("numActiveTasks") or 0), 1 if j.get("status") == "RUNNING" else 0) for j in mine)

    def _rest(self, path: str) -> Any:
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}", timeout=10) as resp:
            return json.loads(resp.read())


class LingeringTasks:
    """Whether a session whose operations ended still has Spark tasks on the server, bounded by
    :data:`TASKS_TIMEOUT` from the first look (then :meth:`running` raises, naming the session and
    the UI: the caller fails and Airflow retries, rather than run beside the tasks or wait forever).

    A server without a UI (``spark.ui.enabled=false``), or whose UI does not answer, cannot show
    its tasks: logged once, and read as "none" (the cancelled work may run a few seconds more)."""

    def __init__(
        self, ui: ServerUi | None, session_id: str, log: Any, *, missing: str = "", timeout: float | None = None
    ) -> None:
        self.ui, self.session_id, self.log, self.missing = ui, session_id, log, missing
        self.timeout = TASKS_TIMEOUT if timeout is None else timeout
        self._since: float | None = None
        self._told = False

    def running(self) -> bool:
        if self.ui is None:
            self._tell(self.missing or "the server runs no Spark UI")
            return False
        try:
            count = self.ui.session_tasks(self.session_id)
        except (OSError, ValueError) as exc:
            self._tell(f"its Spark UI {self.ui.url} did not answer ({exc})")
            return False
        now = time.monotonic()
        if count == 0:
            return False
        if self._since is None:
            self._since = now
            self.log.warning(
                "Spark Connect session %s: %d Spark task(s) of its interrupted work still run on the server (a "
                "cancelled job's tasks end after it); waiting for them to end (at most %.0fs).",
                self.session_id, count, self.timeout,
            )  # fmt: skip
        elif now - self._since > self.timeout:
            raise RuntimeError(
                f"Spark Connect session {self.session_id}: {count} Spark task(s) still run on the server "
                f"{self.timeout:.0f}s after its work was interrupted (see {self.ui.url}/jobs/). Nothing new was "
                "started beside them; the task fails and its retry looks again. If they never end, kill them "
                "from the Spark UI or restart the Connect server."
            )
        return True

    def _tell(self, why: str) -> None:
        if not self._told:
            self._told = True
            self.log.warning(
                "Spark Connect session %s: cannot see whether Spark tasks of its cancelled operations still run: "
                "%s. Going ahead; they may run for a few seconds more. Enable the Connect server's Spark UI to "
                "wait for them.",
                self.session_id, why,
            )  # fmt: skip
