"""What the guard decided, told to whoever watches: Airflow's metrics, or nobody.

The protocol stays Airflow-free (docs/architecture.md, "Layers"), yet where it decides is where a
metric must count: the skip, the launch, each recovery step, a lease taken over. So it tells a
:class:`Signals` sink, carried by the :class:`~airflow_jrs.store.namespace.JobNamespace` every
caller already has (so the sink's words sit in the domain, below the store); the Airflow hook
hands in the one that emits Airflow metrics (:mod:`airflow_jrs.observability.metrics`), everybody
else gets :data:`NO_SIGNALS`.

A sink is told, never asked: nothing it says changes a decision. :func:`tell` calls it so that a
sink that raises costs a debug line, never the attempt (a metrics backend that is down must not
fail a task).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from airflow_jrs.domain.model import JobResult

#: A SUCCEEDED result for the same fingerprint was reused: nothing launched.
SKIPPED = "skipped"
#: This attempt launched the application (after an intent, under its fence).
LAUNCHED = "launched"
#: A dead predecessor's finished output was published without running it again.
ADOPTED = "adopted"
#: A dead predecessor left no complete output: this attempt submits the job again.
RESUBMITTED = "resubmitted"
#: The attempt waited for a predecessor's application to end (``predecessor="wait"``).
WAITED = "waited"
#: The attempt stopped a predecessor's application (``predecessor="stop"``).
STOPPED_PREDECESSOR = "stopped_predecessor"
#: Every decision a sink is told of, in the order an attempt meets them.
DECISIONS = (SKIPPED, WAITED, STOPPED_PREDECESSOR, ADOPTED, RESUBMITTED, LAUNCHED)

_log = logging.getLogger(__name__)


class Signals(Protocol):
    """What a sink hears. ``dag_id`` and ``task_id`` name the task that decided (``None`` when a
    caller outside Airflow does not know them). Implementations must not block and should not
    raise (:func:`tell` contains them all the same)."""

    def decided(
        self, decision: str, *, dag_id: str | None, task_id: str | None, reused: JobResult | None = None
    ) -> None:
        """``decision`` is one of :data:`DECISIONS`; ``reused`` is the result a skip reused (its
        :func:`run_seconds` is the Spark time the skip avoided)."""

    def took_over(self, *, dag_id: str | None, task_id: str | None) -> None:
        """The attempt took over the lease of a holder that is provably dead, or an earlier try."""


class NoSignals:
    """The sink of code that runs without Airflow (trials, scripts, the CLI): hears nothing."""

    def decided(
        self, decision: str, *, dag_id: str | None, task_id: str | None, reused: JobResult | None = None
    ) -> None:
        return None

    def took_over(self, *, dag_id: str | None, task_id: str | None) -> None:
        return None


NO_SIGNALS: Signals = NoSignals()


def run_seconds(result: JobResult) -> float | None:
    """Seconds the result's application ran (``end_time - start_time``), what reusing it saves;
    ``None`` when the result does not say (an adopted result has no start time) or its clock went
    backwards."""
    if result.start_time is None or result.end_time is None:
        return None
    seconds = (result.end_time - result.start_time).total_seconds()
    return seconds if seconds >= 0 else None


def tell(call: Callable[[], object]) -> None:
    """Run ``call`` (one sink call, e.g. ``lambda: jobs.signals.took_over(...)``); a sink that
    raises is logged at debug and ignored: the attempt goes on as if it had heard."""
    try:
        call()
    except Exception as exc:
        _log.debug("A signals sink failed (ignored): %r", exc)
