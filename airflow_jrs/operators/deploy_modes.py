"""What differs between Spark deploy modes, behind one small interface.

Recovery needs three things from wherever Spark runs: how to tag a submission so that a
successor can find it, how to find (and stop) a dead attempt's application, and what id
spark-submit reported for it. Each deploy mode answers them in its own way:

==================  ===============================  ==========================================
deploy mode         tag on the submission            a predecessor is found as
==================  ===============================  ==========================================
local / client      ``spark.jrs.*`` conf on the       its spark-submit process on this host
                    spark-submit command line        (psutil, by command line)
YARN cluster        ``spark.yarn.tags=jrs-<tag>``     a live application with the tag (the
                                                     ResourceManager REST API the provider uses)
Kubernetes cluster  driver label ``jrs-job=<tag>``    a Pending/Running driver pod with the label
standalone client   the application name              a live application of that name on the
                    ``jrs-<ns>-<job id>-f<fence>``    master (its ``/json/`` status), killed
                                                     through the master (``/app/kill/``)
==================  ===============================  ==========================================

Every mode also scans local processes: a spark-submit that outlived its task on this host
is a predecessor whatever the master. The Spark provider's hook tells the mode
(:func:`deploy_mode_for`); the tag is :func:`airflow_jrs.paths.job_tag`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import psutil
import requests

from airflow_jrs.paths import app_name_prefix
from airflow_jrs.spark.conf import command_line_marks

_YARN_LIVE_STATES = "NEW,NEW_SAVING,SUBMITTED,ACCEPTED,RUNNING"
#: What a standalone driver logs once the master accepted it (StandaloneSchedulerBackend).
_APP_ID = re.compile(r"app ID (app-\d+-\d+)")
_STANDALONE_APP_ID = "_jrs_standalone_app_id"
_CSRF = re.compile(r'name="csrfToken" value="([^"]+)"')


@dataclass
class Predecessor:
    """A live application of an earlier attempt: how to see it, whether it lives, how to stop it."""

    description: str
    alive: Callable[[], bool]
    stop: Callable[[], None]


def find_spark_submit_processes(namespace: str, job_id: str) -> list[psutil.Process]:
    """Live local processes submitted for this job (any fence), by their command line."""
    want_job, want_ns = command_line_marks(job_id=job_id, namespace=namespace)
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if want_job in cmdline and want_ns in cmdline:
            found.append(proc)
    return found


def _process_alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


class DeployMode:
    """Local master or client deploy mode: the application lives in spark-submit, on this host."""

    name = "local"

    def submission_conf(self, tag: str, fence: int, user_conf: dict[str, Any]) -> dict[str, str]:
        """Conf that makes this attempt's application findable (added to the user's conf)."""
        return {}

    def prepare(self, spark_hook: Any) -> None:
        """Called with the hook that will run spark-submit, before it runs (to learn more from it)."""

    def find_predecessors(
        self, spark_hook: Any, namespace: str, job_id: str, tag: str, known_ids: Sequence[str] = ()
    ) -> list[Predecessor]:
        """Live applications of earlier attempts of the job (``known_ids``: ids their intents recorded)."""
        return [
            Predecessor(
                description=f"local spark-submit pid {proc.pid}",
                alive=partial(_process_alive, proc),
                stop=proc.terminate,
            )
            for proc in find_spark_submit_processes(namespace, job_id)
        ]

    def submission(self, spark_hook: Any) -> tuple[int | None, str | None]:
        """(spark-submit pid, application or driver id) as the provider's hook parsed them so far."""
        process = getattr(spark_hook, "_submit_sp", None)
        app_id = (
            getattr(spark_hook, "_yarn_application_id", None)
            or getattr(spark_hook, "_driver_id", None)
            or getattr(spark_hook, _STANDALONE_APP_ID, None)
            or getattr(spark_hook, "_kubernetes_application_id", None)
            or getattr(spark_hook, "_kubernetes_driver_pod", None)
        )
        return (process.pid if process is not None else None), app_id


class YarnClusterMode(DeployMode):
    """YARN cluster mode: the driver runs in the cluster, found by its application tag."""

    name = "yarn-cluster"

    def submission_conf(self, tag: str, fence: int, user_conf: dict[str, Any]) -> dict[str, str]:
        user_tags = user_conf.get("spark.yarn.tags")
        return {"spark.yarn.tags": ",".join(filter(None, [user_tags, f"jrs-{tag}", f"jrs-fence-{fence}"]))}

    def find_predecessors(
        self, spark_hook: Any, namespace: str, job_id: str, tag: str, known_ids: Sequence[str] = ()
    ) -> list[Predecessor]:
        base = spark_hook._get_yarn_rm_base_url()
        auth = spark_hook._resolved_yarn_rm_auth
        resp = requests.get(
            f"{base}/ws/v1/cluster/apps",
            params={"applicationTags": f"jrs-{tag}", "states": _YARN_LIVE_STATES},
            auth=auth,
            timeout=(5, 30),
        )
        resp.raise_for_status()
        apps = ((resp.json() or {}).get("apps") or {}).get("app") or []
        found = super().find_predecessors(spark_hook, namespace, job_id, tag)
        for app in apps:
            app_id = app["id"]

            def alive(app_id: str = app_id) -> bool:
                r = requests.get(f"{base}/ws/v1/cluster/apps/{app_id}", auth=auth, timeout=(5, 30))
                r.raise_for_status()
                return r.json()["app"]["state"] in _YARN_LIVE_STATES.split(",")

            found.append(
                Predecessor(
                    description=f"YARN application {app_id}",
                    alive=alive,
                    stop=partial(spark_hook._kill_yarn_application, app_id),
                )
            )
        return found


class KubernetesClusterMode(DeployMode):
    """Kubernetes cluster mode: the driver is a pod, found by its label."""

    name = "kubernetes-cluster"

    def submission_conf(self, tag: str, fence: int, user_conf: dict[str, Any]) -> dict[str, str]:
        return {"spark.kubernetes.driver.label.jrs-job": tag, "spark.kubernetes.driver.label.jrs-fence": str(fence)}

    def find_predecessors(
        self, spark_hook: Any, namespace: str, job_id: str, tag: str, known_ids: Sequence[str] = ()
    ) -> list[Predecessor]:
        from airflow.providers.cncf.kubernetes import kube_client

        client = kube_client.get_kube_client()
        k8s_namespace = spark_hook._connection["namespace"]
        pods = client.list_namespaced_pod(k8s_namespace, label_selector=f"jrs-job={tag}").items
        found = super().find_predecessors(spark_hook, namespace, job_id, tag)
        for pod in pods:
            if (pod.status.phase or "") not in ("Pending", "Running"):
                continue
            name = pod.metadata.name

            def alive(name: str = name) -> bool:
                try:
                    return client.read_namespaced_pod(name, k8s_namespace).status.phase in ("Pending", "Running")
                except kube_client.ApiException as exc:
                    if exc.status == 404:
                        return False
                    raise

            found.append(
                Predecessor(
                    description=f"Kubernetes driver pod {k8s_namespace}/{name}",
                    alive=alive,
                    stop=partial(client.delete_namespaced_pod, name, k8s_namespace),
                )
            )
        return found


class StandaloneClientMode(DeployMode):
    """Spark's standalone cluster manager in client deploy mode (cluster mode runs no Python apps).

    The driver is spark-submit on the worker host that submitted it; its executors run on the
    cluster. A successor on *another* host cannot see that spark-submit, but the master lists
    the application, and can kill it. The master knows it by id and name only (not its conf),
    so it is found by the id its attempt recorded in the intent (read from spark-submit's
    "Connected to Spark cluster with app ID" line, see :meth:`prepare`) or, when the attempt
    died before that line, by the deterministic name the operator gives it (an application
    that renames itself with ``appName(...)`` can then only be found by id).

    :param webui_url: the master's web UI (the Spark connection's extra ``master_webui_url``)
    """

    name = "standalone-client"
    _LIVE = ("WAITING", "RUNNING", "SUBMITTED")

    def __init__(self, webui_url: str) -> None:
        self.webui_url = webui_url.rstrip("/")

    def _active(self) -> list[dict[str, Any]]:
        resp = requests.get(f"{self.webui_url}/json/", timeout=(5, 30))
        resp.raise_for_status()
        return [a for a in resp.json().get("activeapps", []) if a.get("state") in self._LIVE]

    def prepare(self, spark_hook: Any) -> None:
        """Read the application id from spark-submit's output as the provider's hook consumes it."""
        process_log = spark_hook._process_spark_submit_log

        def scan(lines: Any) -> Any:
            for line in lines:
                if getattr(spark_hook, _STANDALONE_APP_ID, None) is None:
                    match = _APP_ID.search(line if isinstance(line, str) else line.decode(errors="replace"))
                    if match:
                        setattr(spark_hook, _STANDALONE_APP_ID, match.group(1))
                yield line

        spark_hook._process_spark_submit_log = lambda itr: process_log(scan(itr))

    def find_predecessors(
        self, spark_hook: Any, namespace: str, job_id: str, tag: str, known_ids: Sequence[str] = ()
    ) -> list[Predecessor]:
        found = super().find_predecessors(spark_hook, namespace, job_id, tag)
        prefix = app_name_prefix(namespace, job_id)
        for app in self._active():
            name = str(app.get("name", ""))
            by_name = name.startswith(prefix) and name[len(prefix) :].isdigit()
            if not (by_name or app.get("id") in known_ids):
                continue
            app_id = app["id"]
            found.append(
                Predecessor(
                    description=f"standalone application {app_id} ({name}) on {self.webui_url}",
                    alive=partial(self._alive, app_id),
                    stop=partial(self.kill, app_id),
                )
            )
        return found

    def _alive(self, app_id: str) -> bool:
        return any(a["id"] == app_id for a in self._active())

    def kill(self, app_id: str) -> None:
        """Ask the master to kill the application (its executors; the driver then fails).

        Spark 4's web UI refuses state changes without the CSRF token its pages carry: read it
        from the master's page, then post the kill as the page's kill link does.
        """
        page = requests.get(f"{self.webui_url}/", timeout=(5, 30))
        page.raise_for_status()
        token = _CSRF.search(page.text)
        data = {"id": app_id, "terminate": "true", **({"csrfToken": token.group(1)} if token else {})}
        resp = requests.post(f"{self.webui_url}/app/kill/", data=data, timeout=(5, 30))
        resp.raise_for_status()


def _standalone_webui(spark_hook: Any) -> str:
    """The master's web UI: the Spark connection's extra ``master_webui_url``, else port 8080."""
    from airflow.sdk import BaseHook

    extra = BaseHook.get_connection(spark_hook._conn_id).extra_dejson
    if extra.get("master_webui_url"):
        return str(extra["master_webui_url"])
    host = spark_hook._connection["master"].removeprefix("spark://").split(",")[0].split(":")[0]
    return f"http://{host}:8080"


def deploy_mode_for(spark_hook: Any) -> DeployMode:
    """The deploy mode of the provider's ``SparkSubmitHook`` (``None``: local processes only)."""
    if spark_hook is not None and getattr(spark_hook, "_is_yarn_cluster_mode", False):
        return YarnClusterMode()
    if (
        spark_hook is not None
        and getattr(spark_hook, "_is_kubernetes", False)
        and spark_hook._connection["deploy_mode"] == "cluster"
    ):
        return KubernetesClusterMode()
    if spark_hook is not None and str(spark_hook._connection.get("master", "")).startswith("spark://"):
        return StandaloneClientMode(_standalone_webui(spark_hook))
    return DeployMode()
