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

The UI must be the server's own: when ``spark.ui.port`` is taken, Spark binds the next port (up
to ``spark.port.maxRetries`` more), and what answers on the configured one is another
application, or nothing. :class:`ServerUi` therefore looks for the port whose
``/api/v1/applications`` lists the server's ``spark.app.id``, the way Spark picked it. A UI that
cannot be found or does not answer is "unknown", never "no task runs": the caller fails closed,
unless the connection opted out (:data:`UNSEEN_TASKS_KEY`).

Unknown cannot mean "fail" for good, though: a server without a UI shows nothing ever, and a
retry that failed for that would fail on every try. Once the server reports the predecessor's
session *gone* (released or expired: nothing runs in it and nothing can start in it any more),
what is left to fear is only the tail of its cancelled jobs' tasks, so a successor waits a bounded
time for them (``[jrs] connect_unseen_tasks_wait``, :func:`unseen_tasks_wait`) and then goes
ahead, saying so in its log.
"""

from __future__ import annotations

import json
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.protocol.launcher import Predecessor

#: Seconds the Spark tasks of a session whose operations ended may run on before a successor (or
#: the stopped attempt itself) gives up waiting for them (:class:`LingeringTasks`).
TASKS_TIMEOUT = 120.0
#: Seconds between two looks at the server's UI while waiting for those tasks.
TASKS_POLL = 0.25
#: The connection's conf key that says what to do when the server's UI cannot show a session's
#: tasks (no UI, not found, not answering): ``fail`` (the default: unknown is not "none") or
#: ``proceed`` (go ahead; a cancelled job's tasks may run on beside the next attempt for a while).
UNSEEN_TASKS_KEY = "jrs.connect.unseenTasks"
#: Spark's default ``spark.port.maxRetries``: how many ports after ``spark.ui.port`` it tries.
PORT_RETRIES = 16


class TasksUnknown(RuntimeError):
    """The server's UI cannot show whether a session's Spark tasks still run; ``why`` says why
    in a few words (no UI, not found, not answering), for a caller that words its own message."""

    def __init__(self, message: str, *, why: str = "") -> None:
        super().__init__(message)
        self.why = why or message


def proceeds_unseen(conf: dict[str, Any]) -> bool:
    """Did the connection opt out of failing when the server's tasks cannot be seen? Raises on a
    value that is neither ``fail`` nor ``proceed`` (a typo must not opt out, nor silently not)."""
    value = str(conf.get(UNSEEN_TASKS_KEY, "fail")).strip().lower()
    if value not in ("fail", "proceed"):
        raise JrsConfigError(
            f"{UNSEEN_TASKS_KEY}={conf.get(UNSEEN_TASKS_KEY)!r} in the Spark Connect connection's conf: use "
            "'fail' (the default) or 'proceed'."
        )
    return value == "proceed"


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
    port = conf.get("spark.ui.port") or "4040"
    retries = int(conf.get("spark.port.maxRetries") or PORT_RETRIES)
    return ServerUi(f"http://{host}:{port}", conf.get("spark.app.id") or "", retries)


UI_CONF = {"spark.ui.enabled": "true", "spark.ui.port": "4040", "spark.app.id": "", "spark.port.maxRetries": "16"}


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


@dataclass
class ServerUi:
    """The Connect server's Spark UI: its REST API shows a session's Spark jobs and their tasks.

    ``url`` is where the server's conf says it is (``spark.ui.port``); Spark binds the next free
    port of the ``retries`` after it when that one is taken, so the UI is the first of them whose
    ``/api/v1/applications`` lists ``app_id`` (found once, then kept)."""

    url: str
    app_id: str
    retries: int = 0
    _found: str | None = field(default=None, compare=False, repr=False)

    def candidates(self) -> list[str]:
        base, _, port = self.url.rpartition(":")
        return [f"{base}:{int(port) + i}" for i in range(self.retries + 1)]

    def found(self) -> str:
        """The URL of the server's own UI; raises :class:`TasksUnknown` naming what each port answered."""
        if self._found is not None:
            return self._found
        if not self.app_id:
            raise TasksUnknown(
                f"the server did not tell its spark.app.id, so its Spark UI at {self.url} cannot be told from "
                "another application's"
            )
        answers = []
        for url in self.candidates():
            try:
                apps = _get(f"{url}/api/v1/applications")
            except (OSError, ValueError) as exc:  # refused, 404, not JSON: not the server's UI
                answers.append(f"{url}: {exc}")
                continue
            ids = [a.get("id") for a in apps] if isinstance(apps, list) else []
            if self.app_id in ids:
                self._found = url
                return url
            answers.append(f"{url}: another application {ids}")
        raise TasksUnknown(
            f"no Spark UI of the server's application {self.app_id} on ports {self.candidates()[0]} to "
            f"{self.candidates()[-1]} ({'; '.join(answers[:3])}{'; ...' if len(answers) > 3 else ''})"
        )

    def session_tasks(self, session_id: str) -> int:
        """Spark tasks still running for the session's jobs: a cancelled job ends (``JobEnd``, its
        operation CANCELLED) while its tasks run on until the executor has killed them, seconds
        later (a task blocked in I/O runs until the I/O returns). A job still RUNNING counts one.
        The jobs of a session carry ``..._Session_<id>_...`` in their tags, tagged or not."""
        url = self.found()
        try:
            jobs = _get(f"{url}/api/v1/applications/{self.app_id}/jobs")
        except (OSError, ValueError) as exc:
            raise TasksUnknown(f"the server's Spark UI {url} did not answer ({exc})") from exc
        needle = f"_Session_{session_id}_"
        mine = [j for j in jobs if any(needle in t for t in j.get("jobTags", []))]
        return sum(max(int(j.get("numActiveTasks") or 0), 1 if j.get("status") == "RUNNING" else 0) for j in mine)


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


class LingeringTasks:
    """Whether a session whose operations ended still has Spark tasks on the server, bounded by
    :data:`TASKS_TIMEOUT` from the first look (then :meth:`running` raises, naming the session and
    the UI: the caller fails and Airflow retries, rather than run beside the tasks or wait forever).

    A server without a UI (``spark.ui.enabled=false``), whose UI cannot be found (no port of
    ``spark.ui.port`` and the ``spark.port.maxRetries`` after it lists the server's application)
    or does not answer cannot show its tasks: unknown, so :meth:`running` raises
    :class:`TasksUnknown` the same way, unless ``proceed`` (the connection's
    :data:`UNSEEN_TASKS_KEY` is ``proceed``): then it logs that once and reads "none"."""

    def __init__(
        self,
        ui: ServerUi | None,
        session_id: str,
        log: Any,
        *,
        missing: str = "",
        timeout: float | None = None,
        proceed: bool = False,
    ) -> None:
        self.ui, self.session_id, self.log, self.missing = ui, session_id, log, missing
        self.timeout = TASKS_TIMEOUT if timeout is None else timeout
        self.proceed = proceed
        self._since: float | None = None
        self._told = False

    def running(self) -> bool:
        if self.ui is None:
            return self._unknown(self.missing or "the server runs no Spark UI")
        try:
            count = self.ui.session_tasks(self.session_id)
        except TasksUnknown as exc:
            return self._unknown(str(exc))
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
                f"{self.timeout:.0f}s after its work was interrupted (see {self.ui.found()}/jobs/). Nothing new "
                "was started beside them; the task fails and its retry looks again. If they never end, kill "
                "them from the Spark UI or restart the Connect server."
            )
        return True

    def _unknown(self, why: str) -> bool:
        where = f" (expected at {self.ui.url})" if self.ui is not None else ""
        if not self.proceed:
            raise TasksUnknown(
                f"Spark Connect session {self.session_id}: cannot see whether Spark tasks of its cancelled work "
                f"still run on the server{where}: {why}. Not going ahead beside them; the task fails and its "
                "retry looks again (once the server reports the session gone, a retry waits [jrs] "
                "connect_unseen_tasks_wait for them, then goes ahead). Make the Connect server's Spark UI "
                f"reachable from the workers (spark.ui.enabled=true) to wait for them exactly, or set "
                f"{UNSEEN_TASKS_KEY}=proceed in the connection's conf to go ahead without seeing them.",
                why=why,
            )
        if not self._told:
            self._told = True
            self.log.warning(
                "Spark Connect session %s: cannot see whether Spark tasks of its cancelled operations still run%s: "
                "%s. Going ahead (%s=proceed); they may run for a while beside the next attempt. Make the Connect "
                "server's Spark UI reachable to wait for them.",
                self.session_id, where, why, UNSEEN_TASKS_KEY,
            )  # fmt: skip
        return False


def unseen_tasks_wait(session_id: str, why: str, seconds: float, log: Any) -> Predecessor:
    """The predecessor to wait for when its session is gone but its tasks cannot be seen: alive
    for ``seconds`` (``[jrs] connect_unseen_tasks_wait``) from now, then gone, saying so once.

    Gone means released or expired: the server runs no operation in it and starts none (a paused
    predecessor's client is refused), so only the Spark tasks of its cancelled jobs may still run,
    for as long as a task blocked in I/O takes to notice. Failing closed on them, as an idle
    session still must (a live client may start an operation in it), wedged the job: a server
    without a UI never shows them, so every retry failed until a person stepped in. ``stop`` has
    nothing to stop: the session is gone, and no RPC reaches its tasks."""
    deadline = time.monotonic() + seconds
    log.warning(
        "Spark Connect session %s is gone from the server (released or expired: nothing runs in it and nothing "
        "can start in it), but the server cannot show whether Spark tasks of its cancelled work still run: %s. "
        "Waiting %.0fs ([jrs] connect_unseen_tasks_wait) for them to end, then going ahead.",
        session_id, why, seconds,
    )  # fmt: skip
    told = False

    def alive() -> bool:
        nonlocal told
        if time.monotonic() < deadline:
            return True
        if not told:
            told = True
            log.warning(
                "Spark Connect session %s: waited %.0fs ([jrs] connect_unseen_tasks_wait) for Spark tasks of its "
                "cancelled work that the server cannot show; going ahead. Make the server's Spark UI reachable "
                "from the workers to wait for them exactly.",
                session_id, seconds,
            )  # fmt: skip
        return False

    return Predecessor(
        description=f"Spark Connect session {session_id} (gone; its cancelled tasks unseen, waited for {seconds:g}s)",
        alive=alive,
        stop=lambda: None,
    )
