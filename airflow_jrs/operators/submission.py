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
import threading
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

    def _run(self) -> None:
        intent = self.intent
        try:
            while not self._done.wait(0.25):
                hook = self._hook()
                if hook is None:
                    continue
                pid, app_id = self._mode.submission(hook)
                amended = replace(
                    intent, submit_pid=pid or intent.submit_pid, application_id=app_id or intent.application_id
                )
                if amended == intent:
                    continue
                if self._done.is_set() or not self.intents.amend(amended):
                    return  # Spark ended meanwhile, or the intent is gone with the result
                self.intent = intent = amended
                self._log.info(
                    "Job %s: spark-submit pid %s, application %s recorded in the intent (fence %s).",
                    intent.job_id, intent.submit_pid, intent.application_id or "(local)", intent.fence,
                )  # fmt: skip
        except LeaseLostError:
            return  # the renewer has already stopped Spark and said so
        except Exception as exc:
            self._log.warning("Job %s: could not record the submission in the intent: %s", intent.job_id, exc)
