"""Every write a person makes, one implementation for the CLI and the Job results page.

Forget, mark clean, release from quarantine, stop, cancel (:mod:`.writes`), recompute a job or a
date range (:mod:`.recompute`) and the missing-only backfill (:mod:`.backfill`) were written
twice, once in ``cli/`` and once in ``plugins/``, each with its own guards, and the two drifted
(the page checked the entry it showed before forgetting, the CLI its own preview). Here each
action is one function with its guards; ``cli/`` renders its answer in a terminal and
``plugins/`` as JSON, and each decides who may call it (a terminal's operator; the signed-in
user's rights on the DAG, :mod:`airflow_jrs.plugins.security`).

An action raises :class:`ActionError` with the words for the person (what was wrong and what
to do); the CLI turns its ``kind`` into an exit code, the page into an HTTP status. Airflow's
REST API, through which a recompute clears task instances and a backfill creates runs, is
:mod:`.airflow_api`. What a DAG's date range holds before anything runs, which the actions by
dates start from and ``airflow-jrs plan`` prints, is :mod:`.planning`. Nothing here imports
``cli/`` (the project's architecture test checks it): the page calls the same functions.
"""

from __future__ import annotations

from airflow_jrs.exceptions import JrsError

#: What went wrong, for the CLI's exit code and the page's HTTP status.
NOT_FOUND, USAGE, CONFLICT, UNREACHABLE = "not_found", "usage", "conflict", "unreachable"


#: Who shows an action's error: the terminal (``airflow-jrs``) or the Job results page.
CLI, UI = "cli", "ui"


class ActionError(JrsError):
    """An action refused or failed; the message says what was wrong and what to do next.

    What to do differs by caller (a CLI flag means nothing on the page): ``cli`` and ``ui`` are
    the hints for each, appended to the problem by :meth:`text`. ``str()`` is the CLI's text.
    """

    def __init__(self, message: str, kind: str = USAGE, *, cli: str = "", ui: str = "") -> None:
        self.problem = message
        self.hints = {CLI: cli, UI: ui}
        super().__init__(self.text(CLI))
        self.kind = kind

    def text(self, caller: str) -> str:
        """The problem and what ``caller``'s user does about it (:data:`CLI` or :data:`UI`)."""
        hint = self.hints.get(caller) or ""
        return f"{self.problem}; {hint}" if hint else self.problem
