"""Finding a dead attempt's Spark application, in every deploy mode, so we never run beside it.

Every submission is tagged from the job (``spark.jrs.namespace``/``spark.jrs.job_id`` conf,
``spark.yarn.tags=jrs-<tag>``, Kubernetes driver label ``jrs-job=<tag>``), so a successor
finds its predecessor's application without pid files or ids that may never have been saved
(the provider's own ``durable`` mode admits a crash window between submit and its save):

* local and client mode: the orphaned spark-submit process, by command line (psutil);
* YARN cluster mode: live applications with the tag, through the ResourceManager REST API
  (the Spark connection's ``yarn_resourcemanager_webapp_address``, as the provider uses);
* Kubernetes cluster mode: Pending/Running driver pods with the label.

The successor then waits for them (their work may finish and be adopted) or stops them.
The running attempt, for its part, amends its intent with what spark-submit reports
(:class:`SubmissionRecorder`), so successors and the engineer on call see the pid and id.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import psutil
import requests

from airflow_jrs.exceptions import LeaseLostError
from airflow_jrs.intent import Intent, IntentStore

_YARN_LIVE_STATES = "NEW,NEW_SAVING,SUBMITTED,ACCEPTED,RUNNING"


def job_tag(namespace: str, job_id: str) -> str:
    """A short tag valid as a YARN tag and a Kubernetes label value."""
    return hashlib.sha1(f"{namespace}/{job_id}".encode()).hexdigest()[:16]


@dataclass
class Predecessor:
    """A live application of an earlier attempt: how to see it, whether it lives, how to stop it."""

    description: str
    alive: Callable[[], bool]
    stop: Callable[[], None]


def find_spark_submit_processes(namespace: str, job_id: str) -> list[psutil.Process]:
    """Live local processes submitted for this job (any fence)."""
    want_job = f"spark.jrs.job_id={job_id}"
    want_ns = f"spark.jrs.namespace={namespace}"
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


def _local(namespace: str, job_id: str) -> list[Predecessor]:
    out = []
    for proc in find_spark_submit_processes(namespace, job_id):
        out.append(
            Predecessor(
                description=f"local spark-submit pid {proc.pid}",
                alive=partial(_process_alive, proc),
                stop=proc.terminate,
            )
        )
    return out


def _yarn(hook: Any, tag: str) -> list[Predecessor]:
    base = hook._get_yarn_rm_base_url()
    auth = hook._resolved_yarn_rm_auth
    resp = requests.get(
        f"{base}/ws/v1/cluster/apps",
        params={"applicationTags": f"jrs-{tag}", "states": _YARN_LIVE_STATES},
        auth=auth,
        timeout=(5, 30),
    )
    resp.raise_for_status()
    apps = ((resp.json() or {}).get("apps") or {}).get("app") or []
    out = []
    for app in apps:
        app_id = app["id"]

        def alive(app_id: str = app_id) -> bool:
            r = requests.get(f"{base}/ws/v1/cluster/apps/{app_id}", auth=auth, timeout=(5, 30))
            r.raise_for_status()
            return r.json()["app"]["state"] in _YARN_LIVE_STATES.split(",")

        out.append(
            Predecessor(
                description=f"YARN application {app_id}",
                alive=alive,
                stop=partial(hook._kill_yarn_application, app_id),
            )
        )
    return out


def _kubernetes(hook: Any, tag: str) -> list[Predecessor]:
    from airflow.providers.cncf.kubernetes import kube_client

    client = kube_client.get_kube_client()
    namespace = hook._connection["namespace"]
    pods = client.list_namespaced_pod(namespace, label_selector=f"jrs-job={tag}").items
    out = []
    for pod in pods:
        if (pod.status.phase or "") not in ("Pending", "Running"):
            continue
        name = pod.metadata.name

        def alive(name: str = name) -> bool:
            try:
                return client.read_namespaced_pod(name, namespace).status.phase in ("Pending", "Running")
            except kube_client.ApiException as exc:
                if exc.status == 404:
                    return False
                raise

        out.append(
            Predecessor(
                description=f"Kubernetes driver pod {namespace}/{name}",
                alive=alive,
                stop=partial(client.delete_namespaced_pod, name, namespace),
            )
        )
    return out


def find_predecessors(hook: Any, namespace: str, job_id: str) -> list[Predecessor]:
    """Live applications of earlier attempts of this job, for the hook's master and deploy mode."""
    found = _local(namespace, job_id)
    tag = job_tag(namespace, job_id)
    if hook is not None and getattr(hook, "_is_yarn_cluster_mode", False):
        found += _yarn(hook, tag)
    elif hook is not None and getattr(hook, "_is_kubernetes", False) and hook._connection["deploy_mode"] == "cluster":
        found += _kubernetes(hook, tag)
    return found


def wait_for(predecessors: list[Predecessor], check: Callable[[], object], poll: float = 1.0) -> None:
    """Wait until every predecessor ended, calling ``check`` (the lease check) between polls."""
    alive = list(predecessors)
    while alive:
        check()
        alive = [p for p in alive if p.alive()]
        if alive:
            time.sleep(poll)


class SubmissionRecorder:
    """Amend the intent (fenced) with the spark-submit pid and the application or driver id as
    soon as the Spark provider's hook knows them, so the running job can be found by them.

    Best effort, on its own thread: a failure is logged and never fails the attempt (the lease
    renewer already stops Spark when the lease is lost). :meth:`stop` must return before the
    result is written; the amend script only replaces an existing intent, so even a late
    amendment cannot revive the intent the result script deleted.

    :param hook: returns the operator's current SparkSubmitHook (None until it exists)
    """

    def __init__(self, intents: IntentStore, intent: Intent, hook: Callable[[], Any], log: Any) -> None:
        self.intents = intents
        self.intent = intent
        self._hook = hook
        self._log = log
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"jrs-intent-{intent.job_id}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._done.set()
        self._thread.join(timeout=timeout)

    @staticmethod
    def submission(hook: Any) -> tuple[int | None, str | None]:
        """(spark-submit pid, application or driver id) as the hook has parsed them so far."""
        process = getattr(hook, "_submit_sp", None)
        app_id = (
            getattr(hook, "_yarn_application_id", None)
            or getattr(hook, "_driver_id", None)
            or getattr(hook, "_kubernetes_application_id", None)
            or getattr(hook, "_kubernetes_driver_pod", None)
        )
        return (process.pid if process is not None else None), app_id

    def _run(self) -> None:
        intent = self.intent
        try:
            while not self._done.wait(0.25):
                hook = self._hook()
                if hook is None:
                    continue
                pid, app_id = self.submission(hook)
                amended = replace(
                    intent, submit_pid=pid or intent.submit_pid, application_id=app_id or intent.application_id
                )
                if amended == intent:
                    continue
                if self._done.is_set() or not self.intents.amend(amended):
                    return  # Spark ended meanwhile, or the intent is gone with the result
                self.intent = intent = amended
                self._log.info(
                    "Job %s: spark-submit pid %s, application %s recorded in the intent (fence %s).",
                    intent.job_id, intent.submit_pid, intent.application_id or "(local)", intent.fence,
                )  # fmt: skip
        except LeaseLostError:
            return  # the renewer has already stopped Spark and said so
        except Exception as exc:
            self._log.warning("Job %s: could not record the submission in the intent: %s", intent.job_id, exc)
