"""A dead attempt's application is found by its job tag: local processes for real, YARN through a
fake ResourceManager (a YARN cluster cannot run here; only its REST API is faked)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from airflow_jrs.domain.paths import job_tag
from airflow_jrs.launch.deploy_modes import DeployMode, deploy_mode_for, resolve_target
from airflow_jrs.protocol.recovery import wait_for


def find_predecessors(mode, spark_hook, namespace, job_id, known_ids=()):
    """What the spark-submit launcher asks its deploy mode (SparkSubmitLauncher.find_predecessors)."""
    return mode.find_predecessors(spark_hook, namespace, job_id, job_tag(namespace, job_id), known_ids)


class FakeResourceManager(BaseHTTPRequestHandler):
    apps: dict[str, dict] = {}
    kills: list[str] = []

    def log_message(self, *args):
        pass

    def _json(self, doc):
        body = json.dumps(doc).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        url = urlparse(self.path)
        if url.path == "/ws/v1/cluster/apps":
            q = parse_qs(url.query)
            states = q["states"][0].split(",")
            tag = q["applicationTags"][0]
            apps = [a for a in self.apps.values() if tag in a["applicationTags"] and a["state"] in states]
            return self._json({"apps": {"app": apps} if apps else None})
        app_id = url.path.rsplit("/", 1)[-1]
        app = self.apps[app_id]
        app["polls"] = app.get("polls", 0) + 1
        if app.get("finish_after") and app["polls"] >= app["finish_after"]:
            app["state"] = "FINISHED"
        return self._json({"app": app})

    def do_PUT(self):
        app_id = self.path.split("/")[-2]
        self.kills.append(app_id)
        self.apps[app_id]["state"] = "KILLED"
        self._json({"state": "KILLED"})


@pytest.fixture
def resource_manager(monkeypatch):
    FakeResourceManager.apps, FakeResourceManager.kills = {}, []
    server = HTTPServer(("127.0.0.1", 0), FakeResourceManager)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    extra = {"deploy-mode": "cluster", "yarn_resourcemanager_webapp_address": f"127.0.0.1:{server.server_port}"}
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_YARN", json.dumps({"conn_type": "spark", "host": "yarn", "extra": extra}))
    yield FakeResourceManager
    server.shutdown()


def yarn_hook():
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    return SparkSubmitHook(conn_id="spark_yarn")


def yarn_mode():
    return deploy_mode_for(resolve_target("spark_yarn"))


def test_yarn_application_of_the_job_is_found_by_tag_and_can_be_stopped(resource_manager):
    tag = job_tag("prod", "d.t.2013-01-01")
    resource_manager.apps["application_1_0001"] = {
        "id": "application_1_0001", "state": "RUNNING", "applicationTags": f"jrs-{tag},jrs-fence-4",
    }  # fmt: skip
    resource_manager.apps["application_1_0002"] = {
        "id": "application_1_0002", "state": "RUNNING", "applicationTags": "jrs-someotherjob",
    }  # fmt: skip
    found = find_predecessors(yarn_mode(), yarn_hook(), "prod", "d.t.2013-01-01")
    assert [p.description for p in found] == ["YARN application application_1_0001"]
    assert found[0].alive()
    found[0].stop()
    assert resource_manager.kills == ["application_1_0001"]
    assert not found[0].alive()


def test_waiting_for_a_yarn_predecessor_returns_when_it_finishes_and_checks_the_lease(resource_manager):
    tag = job_tag("prod", "d.t.2013-01-02")
    resource_manager.apps["application_1_0003"] = {
        "id": "application_1_0003", "state": "RUNNING", "applicationTags": f"jrs-{tag}", "finish_after": 3,
    }  # fmt: skip
    checks = []
    wait_for(
        find_predecessors(yarn_mode(), yarn_hook(), "prod", "d.t.2013-01-02"), check=lambda: checks.append(1), poll=0.01
    )
    assert resource_manager.apps["application_1_0003"]["state"] == "FINISHED"
    assert len(checks) >= 2


def test_orphaned_local_spark_submit_is_found_by_its_conf_and_stopped(namespace):
    # A namespace of its own: the search scans every process on the machine.
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "--conf", "spark.jrs.job_id=d.t.x",
         "--conf", f"spark.jrs.namespace={namespace}"],
    )  # fmt: skip
    try:
        import time

        deadline = time.monotonic() + 30
        found = []
        while not found and time.monotonic() < deadline:
            found = find_predecessors(DeployMode(), None, namespace, "d.t.x")
            time.sleep(0.05)
        assert [p.description for p in found] == [f"local launch pid {proc.pid}"]
        assert find_predecessors(DeployMode(), None, f"{namespace}-other", "d.t.x") == []
        found[0].stop()
        proc.wait(timeout=10)
        assert not found[0].alive()
    finally:
        proc.kill()
