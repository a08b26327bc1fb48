"""The Job results view: an Airflow 3 plugin (a FastAPI app under ``/jrs`` and two external views).

Registered through the ``airflow.plugins`` entry point (see ``get_provider_info`` for why not the
provider's ``plugins`` key). Every Airflow process imports plugins at start-up, the scheduler
and the DAG processor included, so this module imports nothing heavy and does no I/O: the
FastAPI app is built on its first request (:class:`LazyApp`), in the API server only.
"""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin

#: Where the app is mounted on the API server; the pages use relative URLs below it.
URL_PREFIX = "/jrs"


class LazyApp:
    """An ASGI app that builds the real one on first use, so importing the plugin stays cheap."""

    def __init__(self) -> None:
        self._app: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self._app is None:
            from airflow_jrs.plugins.api import create_app

            self._app = create_app()
        await self._app(scope, receive, send)


class JrsPlugin(AirflowPlugin):
    """Job results: the store's entries, leases and actions, inside the Airflow UI."""

    name = "airflow_jrs"
    fastapi_apps = [{"app": LazyApp(), "url_prefix": URL_PREFIX, "name": "Job results"}]
    # ``href`` is relative: the UI resolves it against its ``<base href>`` (the API server's
    # base URL), so the views work behind a proxy and under a base-URL sub-path.
    external_views = [
        {
            "name": "Job results",
            "href": "jrs/",
            "url_route": "job-results",
            "destination": "nav",
            "category": "browse",
        },
        {
            "name": "Job result",
            "href": "jrs/ti?dag_id={DAG_ID}&run_id={RUN_ID}&task_id={TASK_ID}&map_index={MAP_INDEX}",
            "url_route": "job-result",
            "destination": "task_instance",
        },
    ]
