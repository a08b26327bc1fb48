"""Extra links of the submit operators: the job's page in the Job results view, and its Spark UI.

In Airflow 3 the worker computes a task's links when the task ends and stores them in XCom, so
they are known even for a task whose job was reused (it links the result it reused). The payload
they link is the one the operator kept when it returned (``guarded.remember_payload``): the
links then cost no XCom read. A try that ran in this process and failed kept an empty payload:
it has nothing in XCom either, so its links read none. Only a task that did not run here (it
ended in the triggerer, or resumed from a deferral) reads its XCom.
"""

from __future__ import annotations

from typing import Any

from airflow.providers.common.compat.sdk import BaseOperatorLink, conf

from airflow_jrs.views.links import SPARK_UI_OPTION, job_page_url, spark_app_url


def _payload(operator: Any, ti_key: Any) -> dict[str, Any]:
    """What the task returned (or pushed before it skipped): the job result payload."""
    from airflow.sdk.execution_time.xcom import XCom  # the worker's configured XCom backend

    from airflow_jrs.domain.payload import SKIPPED_RESULT_KEY
    from airflow_jrs.operators.guarded import remembered_payload

    kept = remembered_payload(operator, ti_key)
    if kept is not None:
        return kept  # empty: this try ran here and returned nothing (it failed)

    for key in ("return_value", SKIPPED_RESULT_KEY):
        try:
            value = XCom.get_value(ti_key=ti_key, key=key)
        except Exception:
            value = None
        if isinstance(value, dict) and value.get("job_id"):
            return value
    return {}


class JobResultLink(BaseOperatorLink):
    """The Job results page opened on this task's job."""

    name = "Job result"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        job_id = _payload(operator, ti_key).get("job_id") or getattr(operator, "job_id", None)
        return job_page_url(job_id) if isinstance(job_id, str) and job_id else ""


class SparkApplicationLink(BaseOperatorLink):
    """The Spark UI (history server, resource manager) of the application that computed the job,
    from ``[jrs] spark_ui_url``; empty when the application id or the template is unknown."""

    name = "Spark application"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        template = conf.get("jrs", SPARK_UI_OPTION, fallback=None)
        return spark_app_url(template, _payload(operator, ti_key).get("application_id")) or ""


def submit_links() -> tuple[BaseOperatorLink, ...]:
    """The links a submit operator declares: the Spark UI's only where ``[jrs] spark_ui_url`` is set.

    Airflow's task runner writes one XCom per declared link when a task ends, whatever the link
    returns, so an unconfigured Spark UI link cost every task (a committed one that only skipped
    included) an XCom write of an empty string: a metadata-DB statement per task for a link that
    can never open. Read where the DAG is parsed, as the workers and the UI see it.
    """
    if conf.get("jrs", SPARK_UI_OPTION, fallback=None):
        return (JobResultLink(), SparkApplicationLink())
    return (JobResultLink(),)
