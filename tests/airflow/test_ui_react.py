"""The React app plugin as Airflow loads it: registration, the shipped bundle, its source.

Airflow's UI (3.1+) imports a react app's ``bundle_url`` as a script and renders the component
it finds on ``globalThis`` under the app's ``name``, passing ``dagId``, ``runId``, ``taskId`` and
``mapIndex``; it provides React, React Router and Chakra UI as globals. So the plugin's names
and the bundle's must agree, and the bundle must use the host's globals, not its own copies.
The browser tests drive the views in a real UI: ``tests/airflow/test_ui_views_load.py`` (each
view loads, on every minor, under a sub-path too) and ``tests/e2e/test_ui_browser.py`` (actions).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from airflow_jrs.plugins import BUNDLE_URL, URL_PREFIX, JrsPlugin, ui_url

pytestmark = pytest.mark.airflow

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "airflow_jrs" / "plugins" / "static" / "ui" / "main.js"
HOST_GLOBALS = ("React", "ReactDOM", "ReactJSXRuntime", "ReactRouterDOM", "ChakraUI")


def test_the_plugin_offers_four_react_apps_from_one_bundle_and_no_iframes():
    apps = {app["destination"]: app for app in JrsPlugin.react_apps}
    assert sorted(apps) == ["dag", "dashboard", "nav", "task_instance"]
    assert apps["nav"]["name"] == "Job results" and apps["nav"]["url_route"] == "job-results"
    assert apps["task_instance"]["url_route"] == "job-result" and apps["dag"]["url_route"] == "job-calendar"
    assert {app["bundle_url"] for app in apps.values()} == {BUNDLE_URL}
    # rooted at [api] base_url's path, served by our own app (behind its login)
    assert BUNDLE_URL == ui_url(URL_PREFIX.strip("/") + "/static/ui/main.js")
    for url in (BUNDLE_URL, apps["nav"]["icon"], apps["nav"]["icon_dark_mode"]):
        assert url.startswith(ui_url("jrs/static/"))
        assert (ROOT / "airflow_jrs" / "plugins" / url.removeprefix(ui_url("jrs/"))).is_file()
    assert not getattr(JrsPlugin, "external_views", [])
    assert not (ROOT / "airflow_jrs" / "plugins" / "static" / "index.html").exists()  # the old page is gone


@pytest.mark.parametrize(
    ("base_url", "rooted"),
    [
        ("", "/jrs/static/ui/main.js"),
        ("http://airflow.example:8080", "/jrs/static/ui/main.js"),
        ("http://airflow.example:8080/", "/jrs/static/ui/main.js"),
        ("https://airflow.example/airflow", "/airflow/jrs/static/ui/main.js"),
        ("https://airflow.example/team/airflow/", "/team/airflow/jrs/static/ui/main.js"),
    ],
)
def test_the_ui_is_given_urls_rooted_at_the_path_of_the_base_url(monkeypatch, base_url: str, rooted: str):
    """Root-relative, never relative to the page: Airflow 3.1 and 3.2 import a ``bundle_url`` as
    given, where ``jrs/...`` is a bare module specifier. No host: a proxy in front keeps working."""
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", base_url)
    assert ui_url("jrs/static/ui/main.js") == rooted


def test_airflow_accepts_the_react_apps_as_its_plugin_api_describes_them():
    from airflow.api_fastapi.core_api.datamodels.plugins import ReactAppResponse

    for app in JrsPlugin.react_apps:
        parsed = ReactAppResponse.model_validate(app)
        assert parsed.bundle_url == BUNDLE_URL and parsed.destination == app["destination"]


def test_the_bundle_registers_each_app_name_as_a_component_using_the_hosts_globals(tmp_path: Path):
    """Evaluate the shipped bundle in Node with stand-ins for the host's globals, as the UI's
    loader would (a script evaluated once; components looked up by name)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    text = BUNDLE.read_text()
    assert len(text.encode()) < 150_000, "the bundle should use the host's React and Chakra, not ship its own"
    names = [app["name"] for app in JrsPlugin.react_apps]
    script = tmp_path / "load.mjs"
    script.write_text(
        "const stub = new Proxy({}, { get: (t, k) => (k === Symbol.toPrimitive ? undefined : () => null) });\n"
        + "".join(f"globalThis.{g} = stub;\n" for g in HOST_GLOBALS)
        + "globalThis.document = { baseURI: 'http://airflow.example/base/' };\n"
        + f"await import({json.dumps(BUNDLE.as_uri())});\n"
        + f"const names = {json.dumps(names)};\n"
        + "console.log(JSON.stringify(Object.fromEntries(names.map((n) => [n, typeof globalThis[n]]))));\n"
        + "console.log(typeof globalThis.AirflowPlugin);\n"
    )
    out = subprocess.run([node, str(script)], capture_output=True, text=True, timeout=60, check=True).stdout.split("\n")
    assert json.loads(out[0]) == dict.fromkeys(names, "function")
    assert out[1] == "function"  # the loader's fallback name


def test_the_shipped_bundle_is_what_its_source_builds_to():
    """``scripts/build_ui --check``: npm ci with the committed lock file, a build into a temporary
    folder, a byte comparison with the shipped bundle."""
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed")
    done = subprocess.run([str(ROOT / "scripts" / "build_ui"), "--check"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
