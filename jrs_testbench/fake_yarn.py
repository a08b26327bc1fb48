"""A stand-in for a YARN ResourceManager in *cluster* deploy mode, for tests that cannot run YARN.

It mocks only the cluster: the operator, the Spark provider's hook, the supervisor, Redis and the
folders are the real ones.

* :class:`FakeResourceManager` is a small real HTTP server speaking what the product and the
  provider read of a ResourceManager's REST API: ``GET /ws/v1/cluster/apps?applicationTags=&states=``,
  ``GET /ws/v1/cluster/apps/<id>`` and ``PUT /ws/v1/cluster/apps/<id>/state`` (a kill).
* :func:`write_fake_yarn_spark_submit` writes a ``spark-submit`` that registers an application
  with the tags of ``spark.yarn.tags``, prints the line Spark's YARN client prints
  (``Submitted application application_...``) and, as with ``spark.yarn.submit.waitAppCompletion``
  (the default), waits until the application ends. Terminating it ends only the client: the
  application runs on, as on YARN. It also writes the ``yarn`` CLI's ``yarn application -kill <id>``
  (the provider's kill when the connection names no ResourceManager web address).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from jrs_testbench.fake_http import FakeHttpServer, JsonHandler, write_script

#: YARN application states in which an application may still run.
LIVE_STATES = ("NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING")


class FakeResourceManager(FakeHttpServer):
    """One fake ResourceManager on a port of 127.0.0.1."""

    def __init__(self) -> None:
        self.apps: dict[str, dict[str, Any]] = {}  # id -> {"state", "tags", "conf"}
        self.submissions: list[str] = []
        self.lock = threading.Lock()
        rm = self

        class Handler(JsonHandler):
            def _body(self) -> Any:
                length = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(length) or b"{}") if length else {}

            def do_GET(self) -> None:
                url = urlparse(self.path)
                query = parse_qs(url.query)
                with rm.lock:
                    if url.path.rstrip("/") == "/ws/v1/cluster/apps":
                        tags = set(query.get("applicationTags", [""])[0].split(",")) - {""}
                        states = set(query.get("states", [",".join(LIVE_STATES)])[0].split(","))
                        apps = [rm.info(i) for i, a in rm.apps.items()
                                if a["state"] in states and (not tags or tags & set(a["tags"]))]  # fmt: skip
                        self._reply(200, {"apps": {"app": apps} if apps else None})
                    elif url.path.startswith("/ws/v1/cluster/apps/"):
                        app_id = url.path.split("/")[5]
                        if app_id in rm.apps:
                            self._reply(200, {"app": rm.info(app_id)})
                        else:
                            self._reply(404, {"RemoteException": {"message": f"{app_id} not found"}})
                    else:
                        self._reply(404, {"error": self.path})

            def do_POST(self) -> None:
                doc = self._body()
                with rm.lock:
                    if self.path == "/jrs-fake/submit":
                        app_id = f"application_1357000000000_{len(rm.submissions) + 1:04d}"
                        rm.submissions.append(app_id)
                        tags = [t for t in str(doc.get("spark.yarn.tags", "")).split(",") if t]
                        rm.apps[app_id] = {"state": "RUNNING", "tags": tags, "conf": doc}
                        self._reply(200, {"application_id": app_id})
                    else:
                        self._reply(404, {"error": self.path})

            def do_PUT(self) -> None:
                doc = self._body()
                url = urlparse(self.path)
                with rm.lock:
                    parts = url.path.split("/")
                    if len(parts) == 7 and parts[6] == "state" and parts[5] in rm.apps:
                        app = rm.apps[parts[5]]
                        if doc.get("state") == "KILLED" and app["state"] in LIVE_STATES:
                            app["state"] = "KILLED"
                        self._reply(202, {"state": app["state"]})
                    else:
                        self._reply(404, {"error": self.path})

        self._serve(Handler)

    def info(self, app_id: str) -> dict[str, Any]:
        app = self.apps[app_id]
        final = {"KILLED": "KILLED", "FINISHED": "SUCCEEDED", "FAILED": "FAILED"}.get(app["state"], "UNDEFINED")
        return {"id": app_id, "name": app["conf"].get("spark.app.name", ""), "state": app["state"],
                "finalStatus": final, "applicationTags": ",".join(app["tags"]), "diagnostics": ""}  # fmt: skip

    def state(self, app_id: str) -> str:
        with self.lock:
            return str(self.apps[app_id]["state"])


_SPARK_SUBMIT = '''#!{python}
"""Fake spark-submit for YARN cluster mode (jrs_testbench.fake_yarn): waits for its application."""
import json, os, sys, time, urllib.request
rm = os.environ["JRS_FAKE_YARN_RM"]
args = sys.argv[1:]
conf = {{}}
for i, a in enumerate(args):
    if a == "--conf":
        key, _, value = args[i + 1].partition("=")
        conf[key] = value
    elif a == "--name":
        conf["spark.app.name"] = args[i + 1]
req = urllib.request.Request(f"{{rm}}/jrs-fake/submit", data=json.dumps(conf).encode(),
                             headers={{"Content-Type": "application/json"}})
app_id = json.load(urllib.request.urlopen(req, timeout=30))["application_id"]
print(f"INFO Client: Submitted application {{app_id}}", flush=True)
while True:
    app = json.load(urllib.request.urlopen(f"{{rm}}/ws/v1/cluster/apps/{{app_id}}", timeout=30))["app"]
    print(f"INFO Client: Application report for {{app_id}} (state: {{app['state']}})", flush=True)
    if app["state"] not in {live}:
        sys.exit(0 if app["finalStatus"] == "SUCCEEDED" else 1)
    time.sleep(0.5)
'''


def write_fake_yarn_spark_submit(bin_dir: str | Path) -> Path:
    """Write ``<bin_dir>/spark-submit`` (put ``bin_dir`` first on ``PATH``; set ``JRS_FAKE_YARN_RM``)."""
    return write_script(bin_dir, "spark-submit", _SPARK_SUBMIT, live=repr(LIVE_STATES))


_YARN_CLI = '''#!{python}
"""Fake yarn CLI (jrs_testbench.fake_yarn): only ``yarn application -kill <id>``."""
import json, os, sys, urllib.request
args = sys.argv[1:]
if args[:2] != ["application", "-kill"]:
    sys.exit("fake yarn: only 'application -kill <id>'")
req = urllib.request.Request(f"{{os.environ['JRS_FAKE_YARN_RM']}}/ws/v1/cluster/apps/{{args[2]}}/state",
                             data=json.dumps({{"state": "KILLED"}}).encode(), method="PUT",
                             headers={{"Content-Type": "application/json"}})
urllib.request.urlopen(req, timeout=30)
print(f"Killing application {{args[2]}}")
'''


def write_fake_yarn_cli(bin_dir: str | Path) -> Path:
    """Write ``<bin_dir>/yarn`` (``yarn application -kill <id>`` against ``JRS_FAKE_YARN_RM``)."""
    return write_script(bin_dir, "yarn", _YARN_CLI)
