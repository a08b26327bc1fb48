"""What a launch started, recorded in the job's intent as soon as it is known.

A successor that finds a dead attempt's intent, and the engineer on call, need the launched pid
and the application or driver id. The launcher learns them while the application starts (the
provider's hook parses spark-submit's output), so a thread of the attempt amends the intent
(fenced) as soon as they appear.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from airflow_jrs.exceptions import LeaseLostError
from airflow_jrs.store.intents import Intent, IntentStore


class SubmissionRecorder:
    """Amend the intent (fenced) with the launched pid and the application or driver id as
    soon as the launcher knows them, so the running job can be found by them.

    Best effort, on its own thread: a failure is logged and never fails the attempt (the lease
    renewer already stops Spark when the lease is lost). :meth:`stop` must return before the
    result is written; the amend script only replaces an existing intent, so even a late
    amendment cannot revive the intent the result script deleted.

    :param submission: (launched pid, application or driver id) as known so far
        (:meth:`~.launcher.Launcher.submission`)
    """

    def __init__(
        self, intents: IntentStore, intent: Intent, submission: Callable[[], tuple[int | None, str | None]], log: Any
    ) -> None:
        self.intents = intents
        self.intent = intent
        self._submission = submission
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
        pid, app_id = self._submission()
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
