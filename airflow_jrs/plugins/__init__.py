"""The Job results plugin: a FastAPI app under ``/jrs`` (the JSON API and the bundle) and a React
app in Airflow's own UI (a page in the nav, a DAG tab, a task instance tab, a dashboard widget).

Registered through the ``airflow.plugins`` entry point (see ``get_provider_info`` for why not the
provider's ``plugins`` key). Every Airflow process imports plugins at start-up, the scheduler
and the DAG processor included, so this module imports nothing heavy and does no I/O: the
FastAPI app is built on its first request (:class:`LazyApp`), in the API server only.

The React apps are one bundle (``static/ui/main.js``, built from ``ui/`` by ``scripts/build_ui``).
Airflow's UI imports it and renders the component the bundle registered on ``globalThis`` under
each app's ``name`` (``ui/src/apps.ts``): the names below and there must agree. The bundle uses
the React and Chakra UI the host lends on ``globalThis``; Airflow 3.1 lends no Chakra UI, so
there the plugin names ``main-with-chakra.js``, the same apps with a Chakra UI of their own.

Every URL handed to the UI is rooted at the path of ``[api] base_url`` (:func:`ui_url`), the
setting Airflow itself mounts its app and scopes its cookies under. A URL relative to the page
will not do: Airflow 3.3's UI resolves a ``bundle_url`` against the page's ``<base href>``, but
3.1 and 3.2 pass it to ``import()`` as given, where ``jrs/static/ui/main.js`` is a bare module
specifier the browser refuses (every view then showed Airflow's 404 page). A root-relative path
means the same in every minor, and carries no host, so a proxy in front keeps working.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from airflow.configuration import conf
from airflow.plugins_manager import AirflowPlugin

from airflow_jrs.compat import AIRFLOW_V_3_2_PLUS

#: Where the app is mounted on the API server, below ``[api] base_url``'s path.
URL_PREFIX = "/jrs"


def ui_url(path: str) -> str:
    """``path`` (relative to the base URL) as the UI must be given it: ``/jrs/...``, or
    ``/airflow/jrs/...`` under ``[api] base_url = https://host/airflow``.

    Derived as Airflow derives its own root path (``airflow.api_fastapi.app.API_ROOT_PATH``: the
    URL's path, with or without a trailing slash), and read when the plugin is imported, as
    Airflow reads it when its app is imported.
    """
    root = urlsplit(conf.get("api", "base_url", fallback="") or "").path.rstrip("/")
    return f"{root}/{path}"


#: The React bundle (served by the FastAPI app, behind its login): the one this Airflow's UI can run.
BUNDLE_URL = ui_url("jrs/static/ui/main.js" if AIRFLOW_V_3_2_PLUS else "jrs/static/ui/main-with-chakra.js")
#: The menu entry's icon (an ``<img>``: it cannot take the theme's color, hence one per mode).
ICONS = {"icon": ui_url("jrs/static/ui/icon-light.svg"), "icon_dark_mode": ui_url("jrs/static/ui/icon-dark.svg")}

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
