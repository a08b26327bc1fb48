"""Where a submission goes, from the Spark connection and the operator's arguments (never the
provider hook's private state), and the configurations that are refused because no result
recorded for them would be true (docs/recovery.md, "Deploy modes")."""

from __future__ import annotations

import json

import pytest

from airflow_jrs.compat import AIRFLOW_V_3_3_PLUS, AIRFLOW_VERSION_TEXT
from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.launch.deploy_mode_choice import deploy_mode_for
from airflow_jrs.launch.deploy_modes import KubernetesClusterMode, YarnClusterMode
from airflow_jrs.launch.spark_target import application_id_of, refuse_unsafe, resolve_target
from airflow_jrs.launch.standalone import StandaloneMode
from airflow_jrs.operators import JrsSparkSubmitOperator


@pytest.fixture
def conn(monkeypatch):
    def define(name: str, **fields) -> str:
        monkeypatch.setenv(f"AIRFLOW_CONN_{name.upper()}", json.dumps({"conn_type": "spark", **fields}))
        return name

    return define


def test_durable_is_the_parents_default_and_yarn_cluster_mode_needs_the_rm_api_with_it(conn, recwarn):
    # Airflow 3.3's default; below it the parent never resumes, and only an explicit True warns
    assert JrsSparkSubmitOperator(task_id="t", application="a.py").durable is AIRFLOW_V_3_3_PLUS
    assert JrsSparkSubmitOperator(task_id="t", application="a.py", durable=False).durable is False
    assert not [w for w in recwarn if "durable" in str(w.message)]
    if not AIRFLOW_V_3_3_PLUS:
        with pytest.warns(UserWarning, match=f"no effect on Airflow {AIRFLOW_VERSION_TEXT}"):
            JrsSparkSubmitOperator(task_id="t", application="a.py", durable=True)
        return
    yarn = conn("spark_yarn_cluster", host="yarn", extra={"deploy-mode": "cluster"})
    with pytest.raises(JrsConfigError, match="yarn_track_via_rm_api=True"):
        JrsSparkSubmitOperator(task_id="t", application="a.py", conn_id=yarn)._spark_target()
    JrsSparkSubmitOperator(task_id="t", application="a.py", conn_id=yarn, durable=False)._spark_target()


def test_the_deploy_mode_comes_from_the_operator_then_the_connection(conn):
    name = conn("spark_ha", host="spark://h1:7077,h2:7077", extra={"deploy-mode": "cluster"})
    target = resolve_target(name)
    assert (target.kind, target.cluster, target.masters) == ("standalone", True, ("h1:7077", "h2:7077"))
    mode = deploy_mode_for(target)
    assert isinstance(mode, StandaloneMode) and mode.cluster
    assert mode.webui_urls == ["http://h1:8080", "http://h2:8080"]
    assert not resolve_target(name, deploy_mode="client").cluster  # the operator's argument wins
    yarn = resolve_target(conn("spark_yarn", host="yarn", extra={"deploy-mode": "cluster"}))
    assert isinstance(deploy_mode_for(yarn), YarnClusterMode)
    k8s = resolve_target(
        conn("spark_k8s", host="k8s://https://kube:6443", extra={"deploy-mode": "cluster", "namespace": "jobs"})
    )
    mode = deploy_mode_for(k8s)
    assert isinstance(mode, KubernetesClusterMode) and mode.k8s_namespace == "jobs"
    assert not deploy_mode_for(resolve_target(conn("spark_loc", host="local[2]"))).cluster


def test_a_missing_connection_is_refused_instead_of_defaulting_to_yarn():
    with pytest.raises(JrsConfigError, match="is not defined"):
        resolve_target("spark_nowhere")


def test_configurations_where_spark_submit_returns_at_submission_are_refused(conn):
    yarn = resolve_target(conn("spark_yarn", host="yarn", extra={"deploy-mode": "cluster"}))
    with pytest.raises(JrsConfigError, match="waitAppCompletion=false"):
        refuse_unsafe(yarn, {"spark.yarn.submit.waitAppCompletion": "false"}, task_id="t")
    refuse_unsafe(yarn, {"spark.yarn.submit.waitAppCompletion": "false"}, task_id="t", yarn_track_via_rm_api=True)
    k8s = resolve_target(conn("spark_k8s", host="k8s://https://kube:6443", extra={"deploy-mode": "cluster"}))
    with pytest.raises(JrsConfigError, match="track_driver_via_k8s_api"):
        refuse_unsafe(k8s, {"spark.kubernetes.submission.waitAppCompletion": "false"}, task_id="t")
    standalone = resolve_target(conn("spark_sa", host="spark://h1:7077"))
    with pytest.raises(JrsConfigError, match=r"spark\.submit\.deployMode=cluster"):
        refuse_unsafe(standalone, {"spark.submit.deployMode": "cluster"}, task_id="t")


@pytest.mark.parametrize(
    ("kind", "value", "ok"),
    [
        ("standalone", "driver-20130101000000-0001", True),
        ("standalone", "app-20130101000000-0001", True),
        ("yarn", "application_1700000000000_0007", True),
        ("local", "local-1700000000000", True),
        ("kubernetes", "spark-0123456789abcdef0123456789abcdef", True),
        ("kubernetes", "jobs:my-app-driver", False),  # the provider's durable "namespace:pod" id
        ("standalone", "Driver successfully submitted", False),
        ("yarn", "driver-20130101000000-0001", False),
        ("standalone", 42, False),
    ],
)
def test_only_ids_shaped_like_ids_are_stored(kind, value, ok):
    assert application_id_of(kind, value) == (value if ok else None)
