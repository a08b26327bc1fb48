"""A stand-in for a Spark standalone cluster in *cluster* deploy mode, for tests that cannot run one.

Standalone cluster mode runs JVM applications only (no PySpark), and a real master cannot be
made to fail over or to lose a status poll on cue. This module mocks only the cluster: the
operator, the Spark provider's hook, the supervisor, Redis and the folders are the real ones.

* :class:`FakeStandaloneMaster` is a small real HTTP server speaking what the product reads of
  a master: the web UI's ``/json/`` (``status``, ``activeapps``, ``activedrivers``,
  ``completeddrivers``, as Spark's ``JsonProtocol.writeMasterState`` writes them), the REST
  submission server's ``/v1/submissions/status/<id>`` and ``/v1/submissions/kill/<id>`` (the
  provider polls and kills through them with ``curl``), and the UI's ``/driver/kill/``.
  ``status="STANDBY"`` makes it a standby master of an HA pair: it lists nothing.
* :func:`write_fake_spark_submit` writes a ``spark-submit`` script that registers a driver
  with the fake master (recording the Spark conf it got: output folder, fence), prints the
  line Spark prints (``Driver successfully submitted as driver-...``) and exits with the code
  the master tells it (``submit_exit_code``): non-zero models a submission that "failed"
  while the driver was already accepted and runs.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from jrs_testbench.fake_http import FakeHttpServer, JsonHandler, write_script

#: Driver states a master lists in ``activedrivers`` (DriverState.scala).
ACTIVE_DRIVER_STATES = ("SUBMITTED", "RUNNING", "RELAUNCHING", "UNKNOWN")


class FakeStandaloneMaster(FakeHttpServer):
    """One fake master: web UI, REST server and "RPC" port on one HTTP port of 127.0.0.1."""

    def __init__(self, *, status: str = "ALIVE") -> None:
        self.status = status
        self.drivers: dict[str, dict[str, Any]] = {}  # id -> {"state", "conf"}
        self.submissions: list[str] = []
        self.requests: list[str] = []
        self.submit_exit_code = 0
        self.state_on_submit = "RUNNING"
        #: spark-submit waits until its driver ends (spark.standalone.submit.waitAppCompletion=true)
        self.submit_waits = False
        #: spark-submit hangs after the master accepted the driver, before it prints the driver id
        self.hang_before_id = False
        #: the master accepts kill requests but the driver runs on (a worker that cannot be reached)
        self.ignore_kill = False
        self.lock = threading.Lock()
        self.asked = threading.Condition(self.lock)
        master = self

        class Handler(JsonHandler):
            # Pretty-printed as Spark's Jackson writer does ("key" : value): the provider parses it.
            json_style = {"indent": 2, "separators": (",", " : ")}

            def do_GET(self) -> None:
                with master.asked:
                    master.requests.append(f"GET {self.path}")
                    master.asked.notify_all()
                    if self.path.rstrip("/") in ("/json", ""):
                        self._reply(200, master.state_json())
                    elif self.path.startswith("/v1/submissions/status/"):
                        self._reply(200, master.rest_status(self.path.rsplit("/", 1)[1]))
                    else:
                        self._reply(404, {"error": self.path})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode() if length else ""
                with master.asked:
                    master.requests.append(f"POST {self.path}")
                    master.asked.notify_all()
                    if self.path == "/jrs-fake/submit":
                        self._reply(200, master.submit(json.loads(raw or "{}")))
                    elif self.path.startswith("/v1/submissions/kill/"):
                        self._reply(200, master.kill(self.path.rsplit("/", 1)[1]))
                    elif self.path.rstrip("/") == "/driver/kill":
                        self._reply(200, master.kill(parse_qs(raw).get("id", [""])[0]))
                    else:
                        self._reply(404, {"error": self.path})

        self._serve(Handler)

    # -- what the master knows ----------------------------------------------------------------
    def state_json(self) -> dict[str, Any]:
        if self.status != "ALIVE":  # a standby master knows no applications and no drivers
            return {"status": self.status, "activeapps": [], "completedapps": [], "activedrivers": [],
                    "completeddrivers": []}  # fmt: skip

        def info(driver_id: str, d: dict[str, Any]) -> dict[str, Any]:
            return {"id": driver_id, "starttime": str(d.get("start_ms", 1357000000000)), "state": d["state"],
                    "cores": 1, "memory": 1024, "submitdate": "Tue Jan 01 00:00:00 UTC 2013", "worker": "worker-1",
                    "mainclass": "Fake"}  # fmt: skip

        active = [info(i, d) for i, d in self.drivers.items() if d["state"] in ACTIVE_DRIVER_STATES]
        done = [info(i, d) for i, d in self.drivers.items() if d["state"] not in ACTIVE_DRIVER_STATES]
        return {"url": f"spark://127.0.0.1:{self.port}", "status": self.status, "activeapps": [],
                "completedapps": [], "activedrivers": active, "completeddrivers": done}  # fmt: skip

    def rest_status(self, driver_id: str) -> dict[str, Any]:
        driver = self.drivers.get(driver_id) if self.status == "ALIVE" else None
        if driver is None:
            return {"action": "SubmissionStatusResponse", "submissionId": driver_id, "success": False,
                    "message": f"Driver {driver_id} not found"}  # fmt: skip
        return {"action": "SubmissionStatusResponse", "driverState": driver["state"], "submissionId": driver_id,
                "success": True, "serverSparkVersion": "4.0.0"}  # fmt: skip

    def submit(self, conf: dict[str, str]) -> dict[str, Any]:
        driver_id = f"driver-20130101000000-{len(self.submissions):04d}"
        self.submissions.append(driver_id)
        self.drivers[driver_id] = {"state": self.state_on_submit, "conf": conf, "start_ms": int(time.time() * 1000)}
        return {"driver_id": driver_id, "exit_code": self.submit_exit_code, "wait": self.submit_waits,
                "hang_before_id": self.hang_before_id}  # fmt: skip

    def kill(self, driver_id: str) -> dict[str, Any]:
        driver = self.drivers.get(driver_id)
        if driver is not None and driver["state"] in ACTIVE_DRIVER_STATES and not self.ignore_kill:
            driver["state"] = "KILLED"
        return {"action": "KillSubmissionResponse", "submissionId": driver_id, "success": driver is not None}

    def set_state(self, driver_id: str, state: str) -> None:
        with self.lock:
            self.drivers[driver_id]["state"] = state

    def await_request(self, predicate: Any, timeout: float = 120.0) -> None:
        """Block until some request so far satisfies ``predicate`` (a str -> bool)."""
        with self.asked:
            if not self.asked.wait_for(lambda: any(predicate(r) for r in self.requests), timeout=timeout):
                raise TimeoutError(f"the master was never asked that; it saw {self.requests[-10:]}")


_SPARK_SUBMIT = '''#!{python}
"""Fake spark-submit for a standalone master in cluster mode (jrs_testbench.fake_standalone)."""
import json, sys, time, urllib.request
args = sys.argv[1:]
master = args[args.index("--master") + 1]
host_port = master.removeprefix("spark://").split(",")[0]
conf = {{}}
for i, a in enumerate(args):
    if a == "--conf":
        key, _, value = args[i + 1].partition("=")
        conf[key] = value
req = urllib.request.Request(f"http://{{host_port}}/jrs-fake/submit", data=json.dumps(conf).encode(),
                             headers={{"Content-Type": "application/json"}})
reply = json.load(urllib.request.urlopen(req, timeout=30))
while reply.get("hang_before_id"):  # killed before it could tell anyone the driver id
    time.sleep(1)
print("Running Spark using the REST application submission protocol.", flush=True)
print(f"INFO Client: Driver successfully submitted as {{reply['driver_id']}}", flush=True)
while reply.get("wait"):  # waitAppCompletion: poll the master until the driver ended
    status = json.load(urllib.request.urlopen(
        f"http://{{host_port}}/v1/submissions/status/{{reply['driver_id']}}", timeout=30))
    if status.get("success") and status.get("driverState") not in {active}:
        break
    time.sleep(0.2)
if reply["exit_code"]:
    print("ERROR Client: lost the connection to the master while waiting for the driver", flush=True)
sys.exit(reply["exit_code"])
'''


def write_fake_spark_submit(bin_dir: str | Path) -> Path:
    """Write ``<bin_dir>/spark-submit`` (put ``bin_dir`` first on ``PATH``)."""
    return write_script(bin_dir, "spark-submit", _SPARK_SUBMIT, active=repr(ACTIVE_DRIVER_STATES))
