"""Which deploy mode a resolved Spark target runs in.

Kept apart from :mod:`.deploy_modes` so that the modes that live in modules of their own
(:mod:`.standalone`) can build on the base class without an import circle.
"""

from __future__ import annotations

from airflow_jrs.launch.deploy_modes import DeployMode, KubernetesClusterMode, YarnClusterMode
from airflow_jrs.launch.spark_target import SparkTarget
from airflow_jrs.launch.standalone import StandaloneMode, standalone_webuis


def deploy_mode_for(target: SparkTarget | None) -> DeployMode:
    """The deploy mode of a resolved Spark target (``None``: local processes only)."""
    if target is None:
        return DeployMode()
    if target.kind == "yarn" and target.cluster:
        return YarnClusterMode()
    if target.kind == "kubernetes" and target.cluster:
        return KubernetesClusterMode(target.k8s_namespace)
    if target.kind == "standalone":
        return StandaloneMode(standalone_webuis(target.masters, dict(target.extra)), cluster=target.cluster)
    return DeployMode()
