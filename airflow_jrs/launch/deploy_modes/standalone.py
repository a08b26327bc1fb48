"""Spark's standalone cluster manager (master ``spark://``): a predecessor's driver or application,
asked of every master.

==================  ===============================  ==========================================
deploy mode         tag on the submission            a predecessor is found as
==================  ===============================  ==========================================
standalone client   the application name              a live application of that name or id
                    ``jrs-<ns>-<job id>-f<fence>``    on the ALIVE master of the list
standalone cluster  the driver id the intent          a live driver (SUBMITTED, RUNNING,
                    recorded (``driver-...``)         RELAUNCHING, UNKNOWN) on the ALIVE master
==================  ===============================  ==========================================

What a successor must find, per deploy mode:

* **cluster** deploy mode: the driver runs on a worker, supervised by the master. The attempt
  recorded its ``driver-...`` id in the intent (spark-submit prints it). A driver is live while
  the master lists it in ``activedrivers`` -- SUBMITTED (queued, waiting for a worker), RUNNING,
  RELAUNCHING (``--supervise`` restarts it after a failure) or UNKNOWN (the master is
  recovering) -- so a queued or relaunching driver counts as running: a successor that submitted
  beside it would run the job twice.
* **client** deploy mode: the driver is spark-submit on the host that submitted it, its
  executors on the cluster. The master lists the *application* (``activeapps``) by id
  (``app-...``, read from spark-submit's output) or by the deterministic name the operator gives
  it (``jrs-<ns>-<job id>-f<fence>``).

With high availability (``spark://h1:7077,h2:7077``) only the ALIVE master knows anything; a
STANDBY one lists nothing. Every master of the list is asked (its web UI's ``/json/``, the
shape of Spark's ``JsonProtocol.writeMasterState``); when no master answers as ALIVE the lookup
raises instead of concluding "nothing runs": the successor fails closed and Airflow retries.

Web UIs: the Spark connection's extra ``master_webui_url`` (comma-separated for HA, in the order
of the master list), else port 8080 of each master host.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import partial
from typing import Any

import requests

from airflow_jrs.domain.paths import app_name_prefix
from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.launch import provider_adapter as provider
from airflow_jrs.launch.deploy_modes.base import ClusterUnreachableError, DeployMode, IdShape, SparkTarget
from airflow_jrs.launch.deploy_modes.local import LOCAL_ID
from airflow_jrs.protocol.launcher import Predecessor

#: A driver the master supervises on a worker (cluster mode), and an application it runs
#: executors for (client mode; the driver is spark-submit, which may also say ``local-...``).
DRIVER_ID = IdShape(r"driver-\d{14}-\d{4,}", cluster_driver=True)
APP_ID = IdShape(r"app-\d{14}-\d{4,}")
#: What a standalone driver logs once the master accepted it (StandaloneSchedulerBackend).
_APP_ID_LINE = re.compile(r"app ID (app-\d+-\d+)")
#: Where the client mode keeps the application id it read from spark-submit's output.
STANDALONE_APP_ID = "_jrs_standalone_app_id"
_CSRF = re.compile(r'name="csrfToken" value="([^"]+)"')
#: DriverState.scala: a driver in one of these may still run (or run again).
LIVE_DRIVER_STATES = ("SUBMITTED", "RUNNING", "RELAUNCHING", "UNKNOWN")
#: ApplicationState.scala: an application in one of these holds executors.
LIVE_APP_STATES = ("WAITING", "RUNNING", "SUBMITTED")


#: Seconds of clock difference allowed between a worker and the master when matching a driver's
#: start time against the time an intent was recorded.
DRIVER_CLOCK_MARGIN = 300.0


class UnrecordedDriverError(RuntimeError):
    """An earlier attempt's driver id was never recorded and the master lists drivers that may be it."""


class MastersUnreachableError(ClusterUnreachableError):
    """No master of the list answered as ALIVE: whether a predecessor runs is unknown."""


class StandaloneMode(DeployMode):
    """A standalone master list, in client or cluster deploy mode.

    :param webui_urls: every master's web UI, in the order of the master list
    :param cluster: cluster deploy mode (drivers on the workers, found by their ``driver-...`` id)
    """

    kind = "standalone"
    master_prefixes = ("spark://",)
    ids = (DRIVER_ID, APP_ID, LOCAL_ID)

    def __init__(self, webui_urls: str | Sequence[str], *, cluster: bool = False) -> None:
        urls = [webui_urls] if isinstance(webui_urls, str) else list(webui_urls)
        self.webui_urls = [u.rstrip("/") for u in urls]
        self.cluster = cluster
        self.name = "standalone-cluster" if cluster else "standalone-client"

    @classmethod
    def for_target(cls, target: SparkTarget) -> DeployMode:
        return cls(standalone_webuis(standalone_masters(target.master), dict(target.extra)), cluster=target.cluster)

    @property
    def webui_url(self) -> str:
        """The first master's web UI (single-master setups)."""
        return self.webui_urls[0]

    # -- what the masters know -----------------------------------------------------------------
    def _alive_state(self) -> tuple[str, dict[str, Any]]:
        """(web UI, /json/ document) of the ALIVE master; raises when none answers as ALIVE."""
        seen = []
        for url in self.webui_urls:
            try:
                resp = requests.get(f"{url}/json/", timeout=(5, 30))
                resp.raise_for_status()
                doc = resp.json()
            except (requests.RequestException, ValueError) as exc:
                seen.append(f"{url}: {type(exc).__name__}: {exc}")
                continue
            status = str(doc.get("status", "ALIVE")).upper()  # masters before Spark 1.x had none
            if status == "ALIVE":
                return url, doc
            seen.append(f"{url}: {status}")
        raise MastersUnreachableError(
            "no standalone master answered as ALIVE (" + "; ".join(seen) + "): cannot tell whether the "
            "predecessor's driver still runs, so nothing is submitted. Check the masters (or the Spark "
            "connection's extra master_webui_url), then retry the task."
        )

    def driver_state(self, driver_id: str) -> str | None:
        """The driver's state on the ALIVE master (``None``: the master does not know it)."""
        _, doc = self._alive_state()
        for key in ("activedrivers", "completeddrivers"):
            for driver in doc.get(key) or []:
                if driver.get("id") == driver_id:
                    return str(driver.get("state", "UNKNOWN")).upper()
        return None

    def drivers_since(self, since: float) -> list[str]:
        """Live drivers (``id (state)``) the ALIVE master accepted at or after ``since`` (epoch seconds,
        less :data:`DRIVER_CLOCK_MARGIN`): a driver accepted then may be one whose id nobody recorded."""
        _, doc = self._alive_state()
        found = []
        for driver in doc.get("activedrivers") or []:
            state = str(driver.get("state", "UNKNOWN")).upper()
            try:
                started = int(driver.get("starttime")) / 1000.0
            except (TypeError, ValueError):
                started = since  # unknown: it may be ours
            if state in LIVE_DRIVER_STATES and started >= since - DRIVER_CLOCK_MARGIN:
                found.append(f"{driver.get('id')} ({state})")
        return found

    def _driver_alive(self, driver_id: str) -> bool:
        return self.driver_state(driver_id) in LIVE_DRIVER_STATES

    def _live_apps(self) -> list[dict[str, Any]]:
        _, doc = self._alive_state()
        return [a for a in doc.get("activeapps") or [] if a.get("state") in LIVE_APP_STATES]

    def _app_alive(self, app_id: str) -> bool:
        return any(a.get("id") == app_id for a in self._live_apps())

    # -- DeployMode -----------------------------------------------------------------------------
    def reported_candidates(self, spark_hook: Any) -> tuple[Any, ...]:
        return (*super().reported_candidates(spark_hook), getattr(spark_hook, STANDALONE_APP_ID, None))

    def before_resubmit(self, intent: Any) -> None:
        refuse_while_unrecorded_driver_may_run(self, intent)

    def prepare(self, spark_hook: Any) -> None:
        """Client mode: read the application id from spark-submit's output as the provider's hook
        consumes it (cluster mode: the provider parses the driver id itself)."""
        if self.cluster:
            return

        def scan(lines: Any) -> Any:
            for line in lines:
                if getattr(spark_hook, STANDALONE_APP_ID, None) is None:
                    match = _APP_ID_LINE.search(line if isinstance(line, str) else line.decode(errors="replace"))
                    if match:
                        setattr(spark_hook, STANDALONE_APP_ID, match.group(1))
                yield line

        provider.read_along(spark_hook, scan)

    def cluster_predecessors(
        self, spark_hook: Any, namespace: str, job_id: str, tag: str, known_ids: Sequence[str] = ()
    ) -> list[Predecessor]:
        found = []
        for driver_id in (i for i in known_ids if i.startswith("driver-")):
            state = self.driver_state(driver_id)
            if state in LIVE_DRIVER_STATES:
                found.append(
                    Predecessor(
                        description=f"standalone driver {driver_id} ({state}) on {', '.join(self.webui_urls)}",
                        alive=partial(self._driver_alive, driver_id),
                        stop=partial(self.kill, driver_id, "driver"),
                    )
                )
        prefix = app_name_prefix(namespace, job_id)
        for app in self._live_apps():
            name = str(app.get("name", ""))
            by_name = name.startswith(prefix) and name[len(prefix) :].isdigit()
            if not (by_name or app.get("id") in known_ids):
                continue
            app_id = app["id"]
            found.append(
                Predecessor(
                    description=f"standalone application {app_id} ({name}) on {', '.join(self.webui_urls)}",
                    alive=partial(self._app_alive, app_id),
                    stop=partial(self.kill, app_id, "app"),
                )
            )
        return found

    def kill(self, target_id: str, what: str = "app") -> None:
        """Ask the ALIVE master to kill an application or a driver, as its web UI's kill link does.

        Spark 4's web UI refuses state changes without the CSRF token its pages carry: read it
        from the master's page, then post the kill (``/app/kill/`` or ``/driver/kill/``).
        """
        url, _ = self._alive_state()
        page = requests.get(f"{url}/", timeout=(5, 30))
        token = _CSRF.search(page.text) if page.ok else None
        data = {"id": target_id, "terminate": "true", **({"csrfToken": token.group(1)} if token else {})}
        resp = requests.post(f"{url}/{what}/kill/", data=data, timeout=(5, 30))
        resp.raise_for_status()


#: The name before drivers were looked up (client mode only); kept for callers of that name.
StandaloneClientMode = StandaloneMode


def standalone_masters(master: str) -> tuple[str, ...]:
    """Every ``host:port`` of a master URL's list (HA: ``spark://h1:7077,h2:7077``)."""
    return tuple(m.strip() for m in master.removeprefix("spark://").split(","))


def standalone_webuis(masters: Sequence[str], extra: dict[str, Any]) -> list[str]:
    """Every master's web UI: the connection extra ``master_webui_url`` (comma-separated for HA,
    in the order of the master list), else port 8080 of each master host."""
    configured = str(extra.get("master_webui_url") or "")
    if configured:
        urls = [u.strip() for u in configured.split(",") if u.strip()]
        if len(masters) > 1 and len(urls) != len(masters):
            raise JrsConfigError(
                f"the Spark connection lists {len(masters)} standalone masters ({', '.join(masters)}) but its "
                f"extra master_webui_url names {len(urls)} web UIs: give one per master, comma-separated, in "
                "the same order (a successor must ask every master whether a driver still runs)."
            )
        return urls
    return [f"http://{m.split(':')[0]}:8080" for m in masters]


def refuse_while_unrecorded_driver_may_run(mode: DeployMode, intent: Any) -> None:
    """Standalone cluster mode, before a successor submits: an intent without a driver id (its task
    died before spark-submit printed ``driver-...``) may stand for a driver the master runs. The
    master lists drivers by id only, so any live driver it accepted since the intent was recorded
    may be that one: raise (nothing is submitted; Airflow retries) until none is left."""
    if not (isinstance(mode, StandaloneMode) and mode.cluster) or intent.application_id:
        return
    live = mode.drivers_since(intent.started_at)
    if live:
        raise UnrecordedDriverError(
            f"job {intent.job_id}: the attempt with fence {int(intent.fence)} (pid {intent.pid} on {intent.host}) "
            "died before it recorded its driver id, and the standalone master lists live drivers accepted since "
            f"then: {', '.join(live)}. One of them may be that attempt's (its application is named "
            f"{intent.app_name}); nothing is submitted beside it. Kill it on the master if it is this job's; the "
            "job is submitted again once the master lists no live driver accepted since that attempt started "
            "(drivers of other jobs hold it back too until they end). `airflow-jrs intents` shows the attempt."
        )
