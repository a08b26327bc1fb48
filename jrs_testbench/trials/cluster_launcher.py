"""The fault trials' stand-in in *cluster* deploy mode: a detached driver on a standalone master.

Defects 4 and 5 (:mod:`.reverts`) live where the driver outlives its client: spark-submit (the client)
can fail, be killed or return early while the driver runs on in the cluster, and a successor
must find that driver through the master, not among its host's processes. The local stand-in
(:mod:`.launcher`) cannot show either, since its application is the client's child.

* :class:`DriverMaster` is :class:`jrs_testbench.fake_standalone.FakeStandaloneMaster` whose
  drivers are real processes: a submission starts the stand-in application (:mod:`.app`) in a
  session of its own, a child of the master (not of the task), and the master reports it
  RUNNING until it exits (FINISHED or FAILED), or KILLED when killed through ``/driver/kill/``.
  The driver's command line carries the job's marks inside one JSON argument, so the product's
  local scan (:func:`airflow_jrs.protocol.processes.find_job_processes`) cannot see it, as it
  could not see a driver on a worker host. It runs in its own process (:class:`MasterProcess`,
  ``python -m jrs_testbench.trials.cluster_launcher master``), outside every trial's tree.
* :class:`StandaloneClusterLauncher` is the protocol's :class:`~airflow_jrs.protocol.launcher.Launcher`
  for it. The client submits over HTTP and polls the driver's status (``waitAppCompletion``);
  everything else is the product's standalone cluster mode: the driver id is recorded through
  :class:`~airflow_jrs.launch.deploy_modes.standalone.StandaloneMode`'s shape check, predecessors are
  found by :meth:`~airflow_jrs.launch.deploy_modes.base.DeployMode.find_predecessors`, an intent
  without a driver id is refused by ``refuse_while_unrecorded_driver_may_run``, and what the
  attempt may conclude once the client ended is :func:`airflow_jrs.launch.cluster_outcome.outcome_after_submit`.

Client plans (env :data:`CLIENT_ENV`, or ``client=``): ``wait`` (poll until the driver ended),
``lose`` (the client loses the master once its driver wrote its first chunk, and raises: the
exception from the parent of defect 4) and ``return`` (the client returns at once with exit 0, as with
``waitAppCompletion=false``). The trials use it in place of the local stand-in with
:func:`use_for_trials` (the try processes are forked from the caller, so they inherit it).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from airflow_jrs.domain.paths import job_tag
from airflow_jrs.launch import cluster_outcome as cluster
from airflow_jrs.launch.deploy_modes.standalone import StandaloneMode, refuse_while_unrecorded_driver_may_run
from airflow_jrs.protocol.launcher import Ended, Failure, Launch, Launcher, Predecessor
from airflow_jrs.protocol.run import JobRun
from airflow_jrs.spark.conf import job_conf
from airflow_jrs.store import JobResult
from jrs_testbench.fake_standalone import ACTIVE_DRIVER_STATES, FakeStandaloneMaster

#: The master's web UI, for a launcher built without ``master_url`` (a trial's try).
MASTER_ENV = "JRS_TRIALS_CLUSTER_MASTER"
#: The client plan of a launcher built without ``client``: wait, lose or return.
CLIENT_ENV = "JRS_TRIALS_CLUSTER_CLIENT"
CLIENT_PLANS = ("wait", "lose", "return")
#: The submission member carrying the driver's arguments (the stand-in application's).
ARGV_KEY = "jrs.trials.driver_argv"
#: Seconds per chunk of a driver (the stand-in's ``--pace``): a cluster driver is scheduled and
#: started on a worker, so it outlives a client that fails right after the submission, and the
#: next try meets it running, as it would meet a real one.
DRIVER_PACE = "0.5,0.8"


#: A driver process: the stand-in application (standard library only, so it starts fast) with its
#: arguments in ONE JSON argument, where the local scan of command lines does not look.
_DRIVER = "import json, sys; from jrs_testbench.trials import app; sys.exit(app.main(json.loads(sys.argv[1])))"


class DriverMaster(FakeStandaloneMaster):
    """A fake standalone master that runs each submitted driver as a real, detached process."""

    def __init__(self, *, driver_stderr: str | None = None) -> None:
        super().__init__()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.driver_stderr = driver_stderr
        self._done = threading.Event()
        self._reaper = threading.Thread(target=self._reap, name="driver-reaper", daemon=True)

    def submit(self, conf: dict[str, str]) -> dict[str, Any]:  # under self.lock (the request handler)
        argv = json.loads(conf.pop(ARGV_KEY))
        driver_id = f"driver-{time.strftime('%Y%m%d%H%M%S', time.gmtime())}-{len(self.submissions):04d}"
        self.submissions.append(driver_id)
        err = open(self.driver_stderr, "ab") if self.driver_stderr else subprocess.DEVNULL
        try:
            self.procs[driver_id] = subprocess.Popen(
                [sys.executable, "-c", _DRIVER, json.dumps(argv)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
            )  # fmt: skip
        finally:
            if err is not subprocess.DEVNULL:
                err.close()
        self.drivers[driver_id] = {"state": "RUNNING", "conf": conf, "start_ms": int(time.time() * 1000)}
        return {"driver_id": driver_id}

    def kill(self, driver_id: str) -> dict[str, Any]:  # under self.lock
        proc, driver = self.procs.get(driver_id), self.drivers.get(driver_id)
        if proc is not None and driver is not None and driver["state"] in ACTIVE_DRIVER_STATES:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            driver["state"] = "KILLED"
        return {"action": "KillSubmissionResponse", "submissionId": driver_id, "success": driver is not None}

    def _reap(self) -> None:
        while not self._done.wait(0.02):
            with self.lock:
                for driver_id, proc in self.procs.items():
                    driver = self.drivers[driver_id]
                    code = proc.poll()
                    if code is not None and driver["state"] in ACTIVE_DRIVER_STATES:
                        driver["state"] = "FINISHED" if code == 0 else "FAILED"

    def __enter__(self) -> DriverMaster:
        super().__enter__()
        self._reaper.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        with self.lock:
            for proc in self.procs.values():
                if proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        super().__exit__(*exc)


class MasterProcess:
    """A :class:`DriverMaster` in a process of its own (``with MasterProcess(dir) as m: m.url``)."""

    def __init__(self, workdir: str | Path) -> None:
        self.workdir = Path(workdir)
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def __enter__(self) -> MasterProcess:
        self.workdir.mkdir(parents=True, exist_ok=True)
        port_file = self.workdir / "master.port"
        port_file.unlink(missing_ok=True)
        command = [sys.executable, "-m", "jrs_testbench.trials.cluster_launcher", "master", str(port_file),
                   str(self.workdir / "drivers.stderr")]  # fmt: skip
        root = str(Path(__file__).resolve().parents[2])  # the master and its drivers import the test bench
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
        self.proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        for _ in range(600):  # an interpreter start: seconds at worst on a loaded machine
            if port_file.exists() and port_file.read_text().strip():
                self.url = f"http://127.0.0.1:{int(port_file.read_text())}"
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.__exit__()
        raise RuntimeError(f"the fake standalone master did not start (see {self.workdir}; exit {self.proc.poll()})")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class ClientLost(RuntimeError):
    """The client lost the master after the submission: spark-submit failed, its driver runs on."""


class DriverFailed(RuntimeError):
    """The master reports the driver ended without FINISHED."""


def _listing(folder: str) -> list[Path]:
    try:
        return list(Path(folder).iterdir())
    except OSError:
        return []


def _http(url: str, body: dict[str, Any] | None = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as reply:
        return json.load(reply)


class StandaloneClusterLauncher(Launcher):
    """Submits the stand-in application as a standalone cluster-mode driver (module docstring).

    Takes the local stand-in launcher's arguments (``connection``, ``ttl``, ``stderr`` unused: a
    cluster driver has no supervisor beside the task), so a trial's try builds either one."""

    name = "standalone-cluster"
    cluster = True

    def __init__(
        self,
        connection: dict[str, Any] | None = None,
        ttl: float | None = None,
        *,
        history: str,
        lock: str,
        app_args: list[str],
        stderr: int | None = None,
        before_write: Callable[[], None] | None = None,
        master_url: str | None = None,
        client: str | None = None,
        poll: float = 0.05,
        log: logging.Logger | None = None,
    ) -> None:
        self.master_url = (master_url or os.environ.get(MASTER_ENV) or "").rstrip("/")
        if not self.master_url:
            raise ValueError(f"no standalone master: pass master_url or set {MASTER_ENV} (MasterProcess.url)")
        self.client = client or os.environ.get(CLIENT_ENV) or "wait"
        if self.client not in CLIENT_PLANS:
            raise ValueError(f"client plan must be one of {CLIENT_PLANS}, got {self.client!r}")
        self.history, self.lock, self.app_args = history, lock, app_args
        self.before_write, self.poll = before_write, poll
        self.log = log or logging.getLogger("jrs_testbench.trials")
        self.mode = StandaloneMode(self.master_url, cluster=True)
        #: what the deploy mode reads of "the provider's hook": the driver id spark-submit printed
        self.hook = SimpleNamespace(_driver_id=None, _submit_sp=None)
        self.conf: dict[str, str] = {}
        self.argv: list[str] = []
        self._running = False
        self._stopped = threading.Event()

    def prepare(self, launch: Launch) -> dict[str, Any]:
        self.conf = job_conf(job_id=launch.job_id, namespace=launch.namespace, fence=launch.fence,
                             output_dir=launch.staging)  # fmt: skip
        argv = [a for key, value in self.conf.items() for a in ("--conf", f"{key}={value}")]
        self.argv = [*argv, "--history", self.history, "--lock", self.lock, *self.app_args, "--pace", DRIVER_PACE]
        return {"application": "jrs_testbench.trials.app", "application_args": self.argv, "conf": self.conf,
                "master": self.master_url, "deploy_mode": "cluster", "client": self.client}  # fmt: skip

    def run(self, launch: Launch) -> None:
        """spark-submit in cluster mode: submit, then follow the driver until it ended."""
        self._running = True
        try:
            reply = _http(f"{self.master_url}/jrs-fake/submit", {**self.conf, ARGV_KEY: json.dumps(self.argv)})
            driver_id = self.hook._driver_id = reply["driver_id"]
            if self.client == "return":
                return
            # "lose": the client follows its driver until it wrote output, then loses the master
            # (a driver that ended before that is followed to its end, as with "wait")
            state = self._follow(driver_id, until_output=launch.staging if self.client == "lose" else None)
            if state in ACTIVE_DRIVER_STATES:
                raise ClientLost(
                    f"job {launch.job_id}: lost the connection to the master while waiting for {driver_id}"
                )
            if state != "FINISHED":
                raise DriverFailed(f"job {launch.job_id}: driver {driver_id} ended {state}")
        finally:
            self._running = False

    def _follow(self, driver_id: str, *, until_output: str | None = None) -> str:
        """Poll the driver's state until it ended (or, with ``until_output``, wrote a chunk there)."""
        state = "SUBMITTED"
        while not self._stopped.is_set():
            state = _http(f"{self.master_url}/v1/submissions/status/{driver_id}").get("driverState", "UNKNOWN")
            if state not in ACTIVE_DRIVER_STATES:
                break
            if until_output is not None and any(p.name.startswith("part-") for p in _listing(until_output)):
                break
            self._stopped.wait(self.poll)
        return state

    def submission(self) -> tuple[int | None, str | None]:
        return self.mode.submission(self.hook)  # the id only when it has a driver id's shape

    def alive(self) -> bool:
        return self._running

    def stop(self) -> None:
        """The lease was lost or the task is killed: stop following, kill the driver. Never raises."""
        self._stopped.set()
        driver_id = self.submission()[1]
        if driver_id is None:
            return
        try:
            self.mode.kill(driver_id, "driver")
        except Exception as exc:
            self.log.warning("could not kill driver %s through the master: %s", driver_id, exc)

    def kill(self, run: JobRun | None, fence: int | None, *, by: str = "on_kill") -> None:
        self.stop()  # the operator's on_kill: the driver through the deploy mode (no supervisor here)

    def predecessors_of(self, namespace: str, stale: Any) -> list[Predecessor]:
        known, job_id = [stale.application_id] if stale.application_id else [], stale.job_id
        return self.mode.find_predecessors(self.hook, namespace, job_id, job_tag(namespace, job_id), known)

    def before_resubmit(self, stale: Any) -> None:
        refuse_while_unrecorded_driver_may_run(self.mode, stale)

    def outcome(self, launch: Launch, recorder: Any, *, failed: bool) -> Ended:
        return Ended(*cluster.outcome_after_submit(self.mode, self.hook, recorder, namespace=launch.namespace,
                                                   job_id=launch.job_id, fence=launch.fence, staging=launch.staging,
                                                   log=self.log))  # fmt: skip

    def failure(self, error: BaseException) -> Failure:
        return Failure(error, "the standalone cluster submission", application_id=self.submission()[1])

    def finish(self, launch: Launch, result: JobResult) -> JobResult:
        if self.before_write is not None:
            self.before_write()
        return result


@contextlib.contextmanager
def use_for_trials(master_url: str, client: str = "wait") -> Iterator[None]:
    """Within the block, a trial's tries launch through :class:`StandaloneClusterLauncher` on
    ``master_url`` instead of the local stand-in (set before the runner forks its workers)."""
    from jrs_testbench.trials import task

    if not hasattr(task, "StandInLauncher"):
        raise RuntimeError("jrs_testbench.trials.task no longer builds StandInLauncher: update use_for_trials")
    saved = task.StandInLauncher, os.environ.get(MASTER_ENV), os.environ.get(CLIENT_ENV)
    task.StandInLauncher = StandaloneClusterLauncher  # type: ignore[misc,assignment]
    os.environ[MASTER_ENV], os.environ[CLIENT_ENV] = master_url, client
    try:
        yield
    finally:
        task.StandInLauncher = saved[0]  # type: ignore[misc]
        for key, value in ((MASTER_ENV, saved[1]), (CLIENT_ENV, saved[2])):
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _serve(port_file: str, driver_stderr: str | None) -> int:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with DriverMaster(driver_stderr=driver_stderr) as master:
        with tempfile.NamedTemporaryFile("w", dir=os.path.dirname(port_file) or ".", delete=False) as fh:
            fh.write(str(master.port))
        os.replace(fh.name, port_file)
        while not stop.wait(0.2):  # a short wait: the SIGTERM handler runs between waits
            pass
    return 0


def main(argv: list[str] | None = None) -> int:
    """``master <port file> [<drivers' stderr>]``: serve a :class:`DriverMaster` until SIGTERM."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["master"] and len(args) in (2, 3):
        return _serve(args[1], args[2] if len(args) == 3 else None)
    print("usage: python -m jrs_testbench.trials.cluster_launcher master PORT_FILE [DRIVERS_STDERR]")
    return 2


if __name__ == "__main__":
    sys.exit(main())
