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
standalone client   the application name              a live application of that name or id
                    ``jrs-<ns>-<job id>-f<fence>``    on the ALIVE master of the list
standalone cluster  the driver id the intent          a live driver (SUBMITTED, RUNNING,
                    recorded (``driver-...``)         RELAUNCHING, UNKNOWN) on the ALIVE master
                                                     (:mod:`.standalone`)
==================  ===============================  ==========================================

Every mode also scans local processes: a spark-submit that outlived its task on this host
is a predecessor whatever the master. The mode comes from the Spark connection and the
operator's arguments (:func:`.deploy_mode_choice.deploy_mode_for` of a :class:`~.spark_target.SparkTarget`), never
from the provider hook's private state; the tag is :func:`airflow_jrs.domain.paths.job_tag`.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import requests

from airflow_jrs.launch import provider_adapter as provider
from airflow_jrs.protocol.application_ids import application_id_of
from airflow_jrs.protocol.launcher import Predecessor, local_predecessors

_YARN_LIVE_STATES = "NEW,NEW_SAVING,SUBMITTED,ACCEPTED,RUNNING"
#: Where the standalone client mode keeps the application id it read (see .standalone).
_STANDALONE_APP_ID = "_jrs_standalone_app_id"


class ClusterUnreachableError(RuntimeError):
    """The cluster manager could not be asked whether an attempt's driver runs: unknown is not "none"."""


class DeployMode:
    """Local master or client deploy mode: the application lives in spark-submit, on this host."""

    name = "local"
    #: the target kind whose application ids :meth:`submission` accepts (spark_target.application_id_of)
    kind = "local"
    #: the driver runs in the cluster: spark-submit's exit says little about the application
    cluster = False

    def submission_conf(self, tag: str, fence: int, user_conf: dict[str, Any]) -> dict[str, str]:
        """Conf that makes this attempt's application findable (added to the user's conf)."""
        return {}

    def prepare(self, spark_hook: Any) -> None:
        """Called with the hook that will run spark-submit, before it runs (to learn more from it)."""

    def find_predecessors(
        self, spark_hook: Any, namespace: str, job_id: str, tag: str, known_ids: Sequence[str] = ()
    ) -> list[Predecessor]:
        """Live applications of earlier attempts of the job (``known_ids``: ids their intents recorded):
        spark-submit processes on this host, then what the cluster knows (:meth:`cluster_predecessors`)."""
        local = local_predecessors(namespace, job_id)
        return local + self.cluster_predecessors(spark_hook, namespace, job_id, tag, known_ids)

    def cluster_predecessors(
        self, spark_hook: Any, namespace: str, job_id: str, tag: str, known_ids: Sequence[str] = ()
    ) -> list[Predecessor]:
        """Live applications or drivers of earlier attempts that the cluster manager knows
        (none in local mode). Raises when the cluster cannot be asked: unknown is not "none"."""
        return []

    def submission(self, spark_hook: Any) -> tuple[int | None, str | None]:
        """(spark-submit pid, application or driver id) as the provider's hook parsed them so far.

        The id is returned only when it has the shape of an id of this mode
        (:func:`~.spark_target.application_id_of`); anything else is not stored."""
        process = provider.submit_process(spark_hook)
        reported = provider.reported_ids(spark_hook)
        candidates = (
            reported.yarn_application_id,
            reported.driver_id,
            getattr(spark_hook, _STANDALONE_APP_ID, None),
            reported.kubernetes_application_id,
            reported.kubernetes_driver_pod,
        )
        app_id = next((v for v in (application_id_of(self.kind, c) for c in candidates) if v), None)
        return (process.pid if process is not None else None), app_id


class YarnClusterMode(DeployMode):
    """YARN cluster mode: the driver runs in the cluster, found by its application tag."""

    name = "yarn-cluster"
    kind = "yarn"
    cluster = True

    def submission_conf(self, tag: str, fence: int, user_conf: dict[str, Any]) -> dict[str, str]:
        user_tags = user_conf.get("spark.yarn.tags")
        return {"spark.yarn.tags": ",".join(filter(None, [user_tags, f"jrs-{tag}", f"jrs-fence-{fence}"]))}

    def cluster_predecessors(
        self, spark_hook: Any, namespace: str, job_id: str, tag: str, known_ids: Sequence[str] = ()
    ) -> list[Predecessor]:
        try:
            base = provider.yarn_rm_url(spark_hook)
            auth = provider.yarn_rm_auth(spark_hook)
            resp = requests.get(
                f"{base}/ws/v1/cluster/apps",
                params={"applicationTags": f"jrs-{tag}", "states": _YARN_LIVE_STATES},
                auth=auth,
                timeout=(5, 30),
            )
            resp.raise_for_status()
            apps = ((resp.json() or {}).get("apps") or {}).get("app") or []
        except (requests.RequestException, ValueError, RuntimeError) as exc:
            raise ClusterUnreachableError(
                f"cannot ask the YARN ResourceManager which applications tagged jrs-{tag} (job {job_id}) still run "
                f"({type(exc).__name__}: {exc}); an earlier attempt's application may still run, so nothing is "
                "submitted. Set the Spark connection's extra yarn_resourcemanager_webapp_address to the "
                "ResourceManager's web address (and its credentials), or make sure it answers, then retry the task; "
                "`airflow-jrs intents` shows the application id the earlier attempt recorded."
            ) from exc
        found: list[Predecessor] = []
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
                    stop=partial(provider.kill_yarn_application, spark_hook, app_id),
                )
            )
        return found


class KubernetesClusterMode(DeployMode):
    """Kubernetes cluster mode: the driver is a pod, found by its label."""

    name = "kubernetes-cluster"
    kind = "kubernetes"
    cluster = True

    def __init__(self, k8s_namespace: str | None = None) -> None:
        self.k8s_namespace = k8s_namespace or "default"

    def submission_conf(self, tag: str, fence: int, user_conf: dict[str, Any]) -> dict[str, str]:
        return {"spark.kubernetes.driver.label.jrs-job": tag, "spark.kubernetes.driver.label.jrs-fence": str(fence)}

    def cluster_predecessors(
        self, spark_hook: Any, namespace: str, job_id: str, tag: str, known_ids: Sequence[str] = ()
    ) -> list[Predecessor]:
        from airflow.providers.cncf.kubernetes import kube_client

        k8s_namespace = self.k8s_namespace
        try:
            client = kube_client.get_kube_client()
            pods = client.list_namespaced_pod(k8s_namespace, label_selector=f"jrs-job={tag}").items
        except Exception as exc:  # ApiException (403: RBAC), a missing kubeconfig, a connection error
            raise ClusterUnreachableError(
                f"cannot list the driver pods labelled jrs-job={tag} (job {job_id}) in Kubernetes namespace "
                f"{k8s_namespace} ({type(exc).__name__}: {exc}); an earlier attempt's driver may still run, so "
                "nothing is submitted. Give the worker's credentials list, get and delete on pods in that namespace "
                "(or fix its kubeconfig), then retry the task; `airflow-jrs intents` shows the driver the earlier "
                "attempt recorded."
            ) from exc
        found: list[Predecessor] = []
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
