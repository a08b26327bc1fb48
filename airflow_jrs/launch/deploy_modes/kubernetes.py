"""Kubernetes (master ``k8s://``): in cluster mode the driver is a pod, found by its label.

==================  ===============================  ==========================================
deploy mode         tag on the submission            a predecessor is found as
==================  ===============================  ==========================================
Kubernetes cluster  driver label ``jrs-job=<tag>``    a Pending/Running driver pod with the label
Kubernetes client   as :mod:`.local`                 as :mod:`.local`
==================  ===============================  ==========================================

Stopped by deleting the driver pod. The namespace is the conf's ``spark.kubernetes.namespace``,
else the connection extra ``namespace``, else ``default``. Refused (see docs/recovery.md,
"Deploy modes"): cluster mode with ``spark.kubernetes.submission.waitAppCompletion=false``
unless ``track_driver_via_k8s_api=True`` (spark-submit returns when the driver pod is created
and nothing would wait for its end).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.launch.deploy_modes.base import ClusterUnreachableError, DeployMode, IdShape, SparkTarget
from airflow_jrs.launch.deploy_modes.local import LocalMode
from airflow_jrs.protocol.launcher import Predecessor

#: ``spark-<32 hex>`` (the application id) or ``<pod>-driver`` (the driver pod's name, a DNS
#: subdomain): both name a driver that runs in the cluster.
APPLICATION_ID = IdShape(r"spark-[0-9a-f]{32}", cluster_driver=True)
DRIVER_POD = IdShape(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?-driver", cluster_driver=True, printed=False)


class KubernetesClusterMode(DeployMode):
    """Kubernetes cluster mode: the driver is a pod, found by its label."""

    name = "kubernetes-cluster"
    kind = "kubernetes"
    cluster = True
    master_prefixes = ("k8s://",)
    ids = (APPLICATION_ID, DRIVER_POD)

    def __init__(self, k8s_namespace: str | None = None) -> None:
        self.k8s_namespace = k8s_namespace or "default"

    @classmethod
    def for_target(cls, target: SparkTarget) -> DeployMode:
        if not target.cluster:
            return LocalMode()
        return cls(target.conf.get("spark.kubernetes.namespace") or target.extra.get("namespace"))

    @classmethod
    def refuse_unsafe(
        cls, target: SparkTarget, conf: Mapping[str, Any], *, task_id: str, options: Mapping[str, Any]
    ) -> None:
        if not target.cluster or options.get("track_driver_via_k8s_api"):
            return
        if str(conf.get("spark.kubernetes.submission.waitAppCompletion", "true")).strip().lower() == "false":
            raise JrsConfigError(
                f"{task_id}: spark.kubernetes.submission.waitAppCompletion=false makes spark-submit return "
                "when the driver pod is created; nothing would wait for its end. Remove the conf entry, or "
                "set track_driver_via_k8s_api=True (the provider then watches the driver pod)."
            )

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
