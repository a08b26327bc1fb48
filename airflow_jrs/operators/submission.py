"""spark-submit under supervision, and what it started recorded in the job's intent.

Every submission runs under :mod:`airflow_jrs.supervisor` (:class:`Supervision` prefixes the
command the Spark provider builds), which keeps the job's heartbeat while spark-submit lives,
on whatever host it runs. A successor that finds a dead attempt's intent, and the engineer on
call, also need the spark-submit pid and the application or driver id. The provider's hook
learns them while spark-submit runs (from its output), so a thread of the attempt amends the
intent (fenced) as soon as they appear (:class:`SubmissionRecorder`).
"""

from __future__ import annotations

import json
import re
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from airflow_jrs.exceptions import JrsConfigError, LeaseLostError
from airflow_jrs.intent import Intent, IntentStore
from airflow_jrs.operators.deploy_modes import DeployMode
from airflow_jrs.supervisor import SUPERVISOR_ENV, supervised_command

if TYPE_CHECKING:
    from airflow_jrs.hooks.jrs import JrsHook


@dataclass(frozen=True)
class Supervision:
    """What the supervisor of one attempt needs; :meth:`wrap` puts it in front of spark-submit."""

    namespace: str
    job_id: str
    fence: int
    ttl: float
    connection: dict[str, Any]

    @classmethod
    def for_attempt(cls, hook: JrsHook, job_id: str, fence: int, log: Any) -> Supervision | None:
        """``None`` (spark-submit runs bare, as before) when the connection cannot be handed on."""
        try:
            connection = hook.async_connection_kwargs()  # plain kwargs: the sync client takes them too
        except JrsConfigError as exc:
            log.warning("Job %s: spark-submit runs without a supervisor (%s); a successor on another "
                        "host cannot see it.", job_id, exc)  # fmt: skip
            return None
        return cls(hook.namespace, job_id, fence, hook.settings.lease_ttl, connection)

    def wrap(self, spark_hook: Any) -> None:
        """Make the provider's hook run spark-submit under the supervisor (command and environment)."""
        build = spark_hook._build_spark_submit_command

        def supervised(application: str) -> list[str]:
            command = build(application)
            # After the build: the provider sets its environment there (from env_vars in client mode).
            spark_hook._env = {**(spark_hook._env or {}), SUPERVISOR_ENV: json.dumps(self.connection)}
            return supervised_command(
                command, namespace=self.namespace, job_id=self.job_id, fence=self.fence, ttl=self.ttl
            )

        spark_hook._build_spark_submit_command = supervised


class SubmissionRecorder:
    """Amend the intent (fenced) with the spark-submit pid and the application or driver id as
    soon as the Spark provider's hook knows them, so the running job can be found by them.

    Best effort, on its own thread: a failure is logged and never fails the attempt (the lease
    renewer already stops Spark when the lease is lost). :meth:`stop` must return before the
    result is written; the amend script only replaces an existing intent, so even a late
    amendment cannot revive the intent the result script deleted.

    :param hook: returns the operator's current SparkSubmitHook (None until it exists)
    :param mode: the deploy mode, which knows where the hook keeps the pid and the id
    """

    def __init__(
        self, intents: IntentStore, intent: Intent, hook: Callable[[], Any], log: Any, mode: DeployMode | None = None
    ) -> None:
        self.intents = intents
        self.intent = intent
        self._hook = hook
        self._mode = mode or DeployMode()
        self._log = log
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"jrs-intent-{intent.job_id}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._done.set()
        self._thread.join(timeout=timeout)

    def amend_now(self) -> None:
        """Record what the hook knows now, once, on the caller's thread (after :meth:`stop`).

        In cluster deploy modes spark-submit can print the driver id and fail within one poll
        of the thread; the failure path calls this so that the kept intent names the driver a
        successor must find. Never raises (see the class docstring)."""
        try:
            self._amend_once(after_stop=True)
        except LeaseLostError:
            return
        except Exception as exc:
            self._log.warning("Job %s: could not record the submission in the intent: %s", self.intent.job_id, exc)

    def _amend_once(self, *, after_stop: bool = False) -> bool:
        """Amend the intent if the hook knows more; ``False`` once there is nothing left to do."""
        intent = self.intent
        hook = self._hook()
        if hook is None:
            return True
        pid, app_id = self._mode.submission(hook)
        amended = replace(intent, submit_pid=pid or intent.submit_pid, application_id=app_id or intent.application_id)
        if amended == intent:
            return True
        if (self._done.is_set() and not after_stop) or not self.intents.amend(amended):
            return False  # Spark ended meanwhile, or the intent is gone with the result
        self.intent = amended
        self._log.info(
            "Job %s: spark-submit pid %s, application %s recorded in the intent (fence %s).",
            amended.job_id, amended.submit_pid, amended.application_id or "(local)", amended.fence,
        )  # fmt: skip
        return True

    def _run(self) -> None:
        try:
            while not self._done.wait(0.25):
                if not self._amend_once():
                    return
        except LeaseLostError:
            return  # the renewer has already stopped Spark and said so
        except Exception as exc:
            self._log.warning("Job %s: could not record the submission in the intent: %s", self.intent.job_id, exc)


#: Spark's own logging at INFO and below (log4j's ``yy/MM/dd HH:mm:ss LEVEL`` or ISO dates): it
#: follows the application's error in the output (shutdown hooks) and would push it out of the tail.
_CHATTER = re.compile(r"^\s*(?:\d[\d/:.,T+Z-]*\s+){0,2}(?:INFO|DEBUG|TRACE)\b")
#: Application and driver ids as Spark prints them (local, YARN, standalone, Kubernetes).
_APPLICATION_ID = re.compile(
    r"(local-\d{10,}|application_\d+_\d+|app-\d{14}-\d{4,}|driver-\d{14}-\d{4,}|spark-[0-9a-f]{32})(?![\w-])"
)
#: Bounds of what a FAILED result keeps of the output: the result is one Redis string, read by
#: every attempt that decides on the job.
TAIL_LINES = 20
TAIL_CHARS = 4096


class OutputTail:
    """The last lines spark-submit printed that are not Spark's INFO logging (in local and client
    mode the driver's stderr: a PySpark application's traceback ends there), bounded, and the
    first application id it named.

    Spark's provider consumes spark-submit's output line by line (through the supervisor's relay);
    :meth:`wrap` reads along, so nothing is read twice and nothing is kept unbounded. Lines pass the
    provider's masking of secrets (``password=...``) before they are kept.
    """

    def __init__(self, lines: int = TAIL_LINES, chars: int = TAIL_CHARS) -> None:
        self._lines: deque[str] = deque(maxlen=lines)
        self._chars = chars
        self.application_id: str | None = None

    def wrap(self, spark_hook: Any) -> None:
        process_log = spark_hook._process_spark_submit_log
        mask = getattr(spark_hook, "_mask_cmd", None)

        def scan(lines: Any) -> Any:
            for line in lines:
                try:
                    self.add(line, mask)
                except Exception:  # never let the tail break the provider's own reading
                    pass
                yield line

        spark_hook._process_spark_submit_log = lambda itr: process_log(scan(itr))

    def add(self, line: str | bytes, mask: Callable[[list[str]], str] | None = None) -> None:
        text = (line.decode(errors="replace") if isinstance(line, bytes) else line).rstrip()
        if self.application_id is None and (found := _APPLICATION_ID.search(text)):
            self.application_id = found.group(1)
        if text.strip() and not _CHATTER.match(text):
            self._lines.append(mask([text]) if mask is not None else text)

    def text(self) -> str:
        tail = "\n".join(self._lines)
        return tail if len(tail) <= self._chars else "..." + tail[-(self._chars - 3) :]


def failure_summary(exit_code: int | None, application_id: str | None, tail: str, error: BaseException) -> str:
    """What a FAILED result records and the task log shows: exit code, application, the tail."""
    if exit_code is None:  # spark-submit never ran, or the provider failed after it (no driver id, ...)
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        head = f"spark-submit failed: {first[:300]}"
    else:
        head = f"spark-submit exited with code {exit_code}"
    if application_id:
        head += f"; application {application_id}"
    if not tail:
        return head + "; it printed nothing besides Spark's INFO logging"
    return f"{head}; last lines of its output:\n{tail}"
