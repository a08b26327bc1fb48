"""Where Spark runs a submission: one module per deploy mode, and one registry.

:mod:`.base` is what a mode answers (:class:`DeployMode`) and the target a submission goes to
(:class:`SparkTarget`); :mod:`.local`, :mod:`.standalone`, :mod:`.yarn` and :mod:`.kubernetes`
each own their master prefix, application-id shapes, submit conf, predecessor lookup and stop;
:mod:`.registry` lists them (``MODES``) and picks one for a Spark connection. A new deploy mode
is a module here plus its line in ``registry.MODES``.
"""

from __future__ import annotations

from airflow_jrs.launch.deploy_modes.base import ClusterUnreachableError, DeployMode, IdShape, SparkTarget
from airflow_jrs.launch.deploy_modes.kubernetes import KubernetesClusterMode
from airflow_jrs.launch.deploy_modes.local import LocalMode
from airflow_jrs.launch.deploy_modes.registry import (
    MODES,
    application_id_of,
    deploy_mode_for,
    names_cluster_driver,
    refuse_unsafe,
    resolve_target,
)
from airflow_jrs.launch.deploy_modes.standalone import StandaloneMode
from airflow_jrs.launch.deploy_modes.yarn import YarnClusterMode

__all__ = [
    "MODES",
    "ClusterUnreachableError",
    "DeployMode",
    "IdShape",
    "KubernetesClusterMode",
    "LocalMode",
    "SparkTarget",
    "StandaloneMode",
    "YarnClusterMode",
    "application_id_of",
    "deploy_mode_for",
    "names_cluster_driver",
    "refuse_unsafe",
    "resolve_target",
]
