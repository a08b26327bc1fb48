"""Named steps of an attempt, for an observer that must act at an exact moment.

Fault-injection tests need to kill an attempt in windows a few microseconds wide ("Spark
finished, the result not yet written"), which a signal from outside cannot hit reliably. The
operators announce each such step here; the test bench registers an observer that SIGKILLs
the process at the step it was told. With no observer (always, in production) a step costs
one global lookup and a comparison.
"""

from __future__ import annotations

from collections.abc import Callable

#: Every step the operators announce, in the order an attempt reaches them.
STEPS = ("after_lease", "after_intent", "after_spark", "after_result", "cleanup_after_read", "cleanup_before_clean")

StepObserver = Callable[[str], None]
_observer: StepObserver | None = None


def observe_steps(observer: StepObserver | None) -> None:
    """Call ``observer(step)`` at every step from now on (``None`` removes it)."""
    global _observer
    _observer = observer


def reached(step: str) -> None:
    """Announce ``step`` (one of :data:`STEPS`) to the observer, if any."""
    if _observer is not None:
        _observer(step)
