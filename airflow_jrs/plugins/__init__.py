"""The Job results plugin: a FastAPI app under ``/jrs`` (the JSON API and the bundle) and a React
app in Airflow's own UI (a page in the nav, a DAG tab, a task instance tab, a dashboard widget).

Registered through the ``airflow.plugins`` entry point (see ``get_provider_info`` for why not the
provider's ``plugins`` key). Every Airflow process imports plugins at start-up, the scheduler
and the DAG processor included, so this module imports nothing heavy and does no I/O: the
FastAPI app is built on its first request (:class:`LazyApp`), in the API server only.

The React apps are one bundle (``static/ui/main.js``, built from ``ui/`` by ``scripts/build_ui``).
Airflow's UI imports it and renders the component the bundle registered on ``globalThis`` under
each app's ``name`` (``ui/src/main.tsx``): the names below and there must agree.
"""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin

#: Where the app is mounted on the API server; the UI resolves the relative URLs below against
#: its ``<base href>``, so everything works behind a proxy and under a base-URL sub-path.
URL_PREFIX = "/jrs"
#: The React bundle, relative to the UI's base URL (served by the FastAPI app, behind its login).
BUNDLE_URL = "jrs/static/ui/main.js"

#: The menu entry's icon (an ``<img>``: it cannot take the theme's color, hence one per mode).
ICONS = {"icon": "jrs/static/ui/icon-light.svg", "icon_dark_mode": "jrs/static/ui/icon-dark.svg"}

#: The React apps: name (the bundle's component), where Airflow shows it, and its route.
REACT_APPS: list[dict[str, Any]] = [
    {"name": "Job results", "destination": "nav", "url_route": "job-results", "category": "browse", **ICONS},
    {"name": "Job calendar", "destination": "dag", "url_route": "job-calendar"},
    {"name": "Job result", "destination": "task_instance", "url_route": "job-result"},
    {"name": "Job results summary", "destination": "dashboard"},
]


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
    react_apps = [{**app, "bundle_url": BUNDLE_URL} for app in REACT_APPS]
