"""spark-submit under supervision, and what it started recorded in the job's intent.

Every submission runs under :mod:`airflow_jrs.launch.supervisor` (:class:`Supervision` prefixes the
command the Spark provider builds), which keeps the job's heartbeat while spark-submit lives,
on whatever host it runs. A successor that finds a dead attempt's intent, and the engineer on
call, also need the spark-submit pid and the application or driver id. The provider's hook
learns them while spark-submit runs (from its output), so a thread of the attempt amends the
intent (fenced) as soon as they appear (:class:`SubmissionRecorder`).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.launch import provider_adapter as provider
from airflow_jrs.launch.deploy_modes.registry import printed_id_pattern
from airflow_jrs.launch.supervisor import SETTINGS_ENV, SUPERVISOR_ENV, supervised_command

if TYPE_CHECKING:
    from airflow_jrs.launch.deploy_modes.base import DeployMode
    from airflow_jrs.store.namespace import JobNamespace


@dataclass(frozen=True)
class SubmitPlan:
    """One launch as the provider's operator runs it: the values it fills into spark-submit (conf,
    arguments, application name, all of them this fence's) and how its hook is prepared. A value:
    nothing of it is written onto the task's operator (:func:`.provider_adapter.submit_runner`)."""

    conf: dict[str, Any]
    application_args: list[str] | None
    name: str
    mode: DeployMode
    supervision: Supervision | None
    tail: OutputTail

    def prepare(self, spark_hook: Any) -> None:
        """Each hook the provider builds for the launch: the deploy mode reads along (an id it
        needs), the supervisor goes in front of spark-submit, the tail keeps the last lines."""
        self.mode.prepare(spark_hook)
        if self.supervision is not None:
            self.supervision.wrap(spark_hook)
        self.tail.wrap(spark_hook)


@dataclass(frozen=True)
class Supervision:
    """What the supervisor of one attempt needs; :meth:`wrap` puts it in front of spark-submit."""

    namespace: str
    job_id: str
    fence: int
    ttl: float
    connection: dict[str, Any]
    settings: dict[str, Any] | None = None  # the task's [jrs] settings, for a result it records

    @classmethod
    def for_attempt(cls, jobs: JobNamespace, job_id: str, fence: int, log: Any) -> Supervision | None:
        """The supervisor of ``job_id``'s attempt of ``fence``, on the attempt's own namespace
        (its connection and settings: nothing else of the task is needed, so no Airflow hook
        reaches this layer); ``None`` (spark-submit runs bare, as before) when the connection
        cannot be handed on."""
        try:
            connection = jobs.connection_kwargs()
        except JrsConfigError as exc:
            log.warning("Job %s: spark-submit runs without a supervisor (%s); a successor on another "
                        "host cannot see it.", job_id, exc)  # fmt: skip
            return None
        settings = jobs.settings
        return cls(settings.namespace, job_id, fence, settings.lease_ttl, connection, dataclasses.asdict(settings))

    def wrap(self, spark_hook: Any) -> None:
        """Make the provider's hook run spark-submit under the supervisor (command and environment),
        with stdin on ``/dev/null``: the task's own stdin is Airflow's requests socket, and a
        supervisor that outlives a ``kill -9`` of the task must not hold it (Airflow's task
        supervisor keeps the try running until every channel of the task is closed)."""
        env = {SUPERVISOR_ENV: json.dumps(self.connection)}
        if self.settings is not None:
            env[SETTINGS_ENV] = json.dumps(self.settings)

        def supervised(command: list[str]) -> list[str]:
            return supervised_command(
                command, namespace=self.namespace, job_id=self.job_id, fence=self.fence, ttl=self.ttl
            )

        provider.supervise_submission(spark_hook, supervised, env)


#: Spark's own logging at INFO and below (log4j's ``yy/MM/dd HH:mm:ss LEVEL`` or ISO dates): it
#: follows the application's error in the output (shutdown hooks) and would push it out of the tail.
_CHATTER = re.compile(r"^\s*(?:\d[\d/:.,T+Z-]*\s+){0,2}(?:INFO|DEBUG|TRACE)\b")
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
        mask = provider.secret_mask(spark_hook)

        def scan(lines: Any) -> Any:
            for line in lines:
                try:
                    self.add(line, mask)
                except Exception:  # never let the tail break the provider's own reading
                    pass
                yield line

        provider.read_along(spark_hook, scan)

    def add(self, line: str | bytes, mask: Callable[[list[str]], str] | None = None) -> None:
        text = (line.decode(errors="replace") if isinstance(line, bytes) else line).rstrip()
        if self.application_id is None and (found := printed_id_pattern().search(text)):
            self.application_id = found.group(1)
        if text.strip() and not _CHATTER.match(text):
            self._lines.append(mask([text]) if mask is not None else text)

    def text(self) -> str:
        tail = "\n".join(self._lines)
        return tail if len(tail) <= self._chars else "..." + tail[-(self._chars - 3) :]
