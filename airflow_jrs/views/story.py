"""A job's recoveries told in sentences: which try died, what its successor found, what it did.

The recovery log (:mod:`airflow_jrs.store.recoveries`) keeps one step per thing a successor did,
newest first, each with a phrase ("took over the lease from ...", "adopted the finished output
of ..."). A person reading the job page wants the story, oldest first: one sentence per dead
attempt, naming the try (when its spec said), then what the attempt after it did about it. This
is the one place that words it; the page's API and ``airflow-jrs show --json`` both carry it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_jrs.store.recoveries import RECORDED, RecoveryStep


def _dead(predecessor: int | None, facts: dict[str, Any]) -> str:
    """The dead attempt: its try and task when a step's facts name them, its fence always."""
    task = ".".join(str(facts[k]) for k in ("dag_id", "task_id") if facts.get(k))
    if facts.get("try_number") and task:
        return f"Try {facts['try_number']} of {task} (run {facts.get('run_id')}, fence {predecessor})"
    return f"The attempt with fence {predecessor}"


def _join(phrases: list[str]) -> str:
    if len(phrases) == 1:
        return phrases[0]
    return ", then ".join(phrases[:-1]) + " and then " + phrases[-1]


def recovery_story(steps: Sequence[RecoveryStep]) -> list[str]:
    """One sentence per dead attempt and successor, oldest first (``steps`` as the log keeps
    them, newest first). A supervisor's own record of an orphaned attempt is its own sentence."""
    story: list[str] = []
    group: list[RecoveryStep] = []

    def flush() -> None:
        if not group:
            return
        facts: dict[str, Any] = {}
        for step in group:
            facts = {**step.facts, **facts} if facts else dict(step.facts)
        head = _dead(group[0].predecessor, facts)
        phrases = [step.text.rstrip(".") for step in group]
        story.append(f"{head} died; fence {group[0].fence}, the attempt after it, {_join(phrases)}.")
        group.clear()

    for step in reversed(steps):
        if step.event == RECORDED or step.fence is None or step.predecessor is None:
            flush()
            text = step.text.rstrip(".")
            story.append(text[:1].upper() + text[1:] + ".")
            continue
        if group and (group[0].fence, group[0].predecessor) != (step.fence, step.predecessor):
            flush()
        group.append(step)
    flush()
    return story
