"""What every router shares: the connection's jobs, the user's access, confirmations, dates.

Handlers are plain ``def``: FastAPI runs them in its threadpool, where the store's sync API may
block without stalling the API server's event loop.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from typing import Annotated, Any

from airflow.configuration import conf
from fastapi import Body, Depends, HTTPException, Request

from airflow_jrs import actions
from airflow_jrs.actions.airflow_api import AirflowApi
from airflow_jrs.plugins.security import Backend, Connected
from airflow_jrs.views.links import SPARK_UI_OPTION

#: An action's kind of failure (:class:`airflow_jrs.actions.ActionError`) as an HTTP status.
HTTP_STATUS = {actions.NOT_FOUND: 404, actions.USAGE: 400, actions.CONFLICT: 409, actions.UNREACHABLE: 502}

ConfirmBody = Annotated[dict[str, Any], Body(examples=[{"confirm": "my_dag.my_task.2024-01-01"}])]
RangeBody = Annotated[dict[str, Any], Body(examples=[{"start": "2024-01-01", "end": "2024-01-31", "dry_run": True}])]


def _backend(request: Request) -> Backend:
    backend: Backend = request.app.state.backend
    return backend


def _connected(request: Request) -> Connected:
    return _backend(request).get()


#: The connection's jobs, for a handler.
Jobs = Annotated[Connected, Depends(_connected)]


def spark_ui() -> str | None:
    """The ``[jrs] spark_ui_url`` template, for the Spark links of entries."""
    return conf.get("jrs", SPARK_UI_OPTION, fallback=None)


def confirmed(job_id: str, body: Any) -> None:
    """A write names its job again in a JSON body: no cross-site form can send one, and a stray
    click on the wrong row acts on nothing."""
    if not isinstance(body, dict) or body.get("confirm") != job_id:
        raise HTTPException(400, 'send {"confirm": "<the job id>"} to confirm the action on this job')


def parse_since(since: str | None) -> datetime | None:
    if not since:
        return None
    try:
        value = datetime.fromisoformat(since.replace("Z", "+00:00"))
    except ValueError:
        raise HTTPException(400, f"since={since!r} is not an ISO-8601 date or time") from None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


#: The most days one request may span (calendar, backfill and recompute over dates): each walks
#: the DAG's timetable over its span inside the request, so a span of centuries would pin an API
#: server thread for hours; the page asks a month at a time.
MAX_DAYS = 366


def day_range(start: Any, end: Any) -> tuple[datetime, datetime]:
    """``start`` and ``end`` (``YYYY-MM-DD``, UTC) as the range from the first day's midnight to
    the last day's end: every logical date of those days, hourly schedules included. At most
    :data:`MAX_DAYS` days."""
    days = []
    for name, value in (("start", start), ("end", end)):
        try:
            days.append(date.fromisoformat(str(value)))
        except ValueError:
            raise HTTPException(400, f"{name}={value!r} is not a date; send YYYY-MM-DD, e.g. 2024-01-31") from None
    if days[0] > days[1]:
        raise HTTPException(400, f"start {days[0]} is after end {days[1]}; swap them")
    span = (days[1] - days[0]).days + 1
    if span > MAX_DAYS:
        raise HTTPException(
            400,
            f"{days[0]} to {days[1]} is {span} days; one request covers at most {MAX_DAYS} days (a year): "
            "ask for a shorter range, e.g. one month at a time",
        )
    return datetime.combine(days[0], time.min, UTC), datetime.combine(days[1], time.max, UTC)


def user_api(request: Request) -> AirflowApi:
    """Airflow's REST API as the signed-in user (their own token): Airflow authorizes every call
    and writes its audit log; its URL is the deployment's own, never the request's Host."""
    from airflow_jrs.plugins.recompute import airflow_root, user_token

    return AirflowApi(airflow_root(request), token=user_token(request))
