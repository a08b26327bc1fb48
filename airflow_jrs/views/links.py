"""Where a job's result and its Spark application can be seen, as URLs.

The operator's extra links are computed on the worker at the end of a task and the plugin's
API on the API server: both take their URLs from here so that they point at the same places.
URLs into Airflow are *relative* (``jrs/...``): the UI resolves them against its ``<base href>``,
so they keep working behind a proxy or under an ``[api] base_url`` sub-path. Airflow-free.
"""

from __future__ import annotations

from urllib.parse import quote

#: ``[jrs] spark_ui_url``: a URL template with ``{application_id}``, for example a Spark History
#: Server (``http://history:18080/history/{application_id}/jobs/``) or a YARN resource manager
#: (``http://rm:8088/cluster/app/{application_id}``). Unset: no Spark link.
SPARK_UI_OPTION = "spark_ui_url"
#: The Job results page (the plugin's React app in the nav, ``url_route`` ``job-results``),
#: relative to Airflow's base URL.
JOB_PAGE = "plugin/job-results"


def job_page_url(job_id: str) -> str:
    """The Job results page opened on one job, relative to Airflow's base URL."""
    return f"{JOB_PAGE}?job={quote(job_id, safe='')}"


def spark_app_url(template: str | None, application_id: str | None) -> str | None:
    """The Spark UI of ``application_id`` from the configured template; ``None`` when either is
    unknown or the template is not an http(s) URL (a link must never become ``javascript:``)."""
    if not template or not application_id or "{application_id}" not in template:
        return None
    if not template.startswith(("http://", "https://")):
        return None
    return template.replace("{application_id}", quote(application_id, safe=""))


def run_url(dag_id: str, run_id: str) -> str:
    """A DAG run in Airflow's UI (its grid, on that run), relative to Airflow's base URL."""
    return f"dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}"
