"""The deploy modes: where a submission goes, from the Spark connection and the operator's
arguments (never the provider hook's private state), the configurations that are refused because
no result recorded for them would be true (docs/recovery.md, "Deploy modes"), and what an
application id looks like, asked of the modes alone."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from airflow_jrs.compat import AIRFLOW_V_3_3_PLUS, AIRFLOW_VERSION_TEXT
from airflow_jrs.exceptions import JrsConfigError
from airflow_jrs.launch.deploy_modes import (
    KubernetesClusterMode,
    LocalMode,
    StandaloneMode,
    YarnClusterMode,
    application_id_of,
    deploy_mode_for,
    names_cluster_driver,
    refuse_unsafe,
    registry,
    resolve_target,
)
from airflow_jrs.launch.deploy_modes.base import DeployMode, IdShape
from airflow_jrs.launch.submission import OutputTail
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
    assert (target.kind, target.cluster) == ("standalone", True)
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


def test_a_client_mode_or_a_master_no_mode_claims_runs_as_a_local_master(conn):
    yarn_client = deploy_mode_for(resolve_target(conn("spark_yarn_client", host="yarn")))
    assert isinstance(yarn_client, LocalMode) and not yarn_client.cluster
    other = resolve_target(conn("spark_other", host="nowhere://m:5050", extra={"deploy-mode": "cluster"}))
    assert (other.kind, other.cluster) == ("other", True)
    assert isinstance(deploy_mode_for(other), LocalMode)
    assert not resolve_target(conn("spark_local_cluster", host="local[2]", extra={"deploy-mode": "cluster"})).cluster


@pytest.mark.parametrize(
    ("value", "cluster_driver"),
    [
        ("driver-20130101000000-0001", True),  # standalone cluster mode
        ("application_1700000000000_0007", True),  # YARN, even in client mode: waiting is the safe side
        ("spark-0123456789abcdef0123456789abcdef", True),
        ("my-app-driver", True),  # a Kubernetes driver pod
        ("app-20130101000000-0001", False),  # a standalone client-mode application: spark-submit is its driver
        ("local-1700000000000", False),
        ("jobs:my-app-driver", False),
        (None, False),
    ],
)
def test_a_cluster_driver_is_named_by_the_shapes_the_modes_mark(value, cluster_driver):
    assert names_cluster_driver(value) is cluster_driver


def test_the_output_tail_finds_the_first_printed_id_of_any_mode_but_no_loose_shape():
    tail = OutputTail()
    tail.add("24/01/01 INFO Client: Starting pod my-app-driver")  # too loose to look for in free text
    assert tail.application_id is None
    tail.add("Submitted application application_1700000000000_0007 to ResourceManager")
    tail.add("driver-20130101000000-0001")
    assert tail.application_id == "application_1700000000000_0007"


class _FakeMode(DeployMode):
    """A mode no release has: what adding one takes is its module and its line in MODES."""

    name = "fake-cluster"
    kind = "fake"
    cluster = True
    master_prefixes = ("fake://",)
    ids = (IdShape(r"fake-\d{6}", cluster_driver=True),)

    def submission_conf(self, tag, fence, user_conf):
        return {"spark.fake.tag": tag}


def test_a_mode_in_the_registry_is_chosen_by_its_prefix_and_its_ids_are_known_everywhere(conn, monkeypatch):
    monkeypatch.setattr(registry, "MODES", (*registry.MODES, _FakeMode))
    target = resolve_target(conn("spark_fake", host="fake://m:1", extra={"deploy-mode": "cluster"}))
    assert (target.kind, target.cluster) == ("fake", True)
    mode = deploy_mode_for(target)
    assert isinstance(mode, _FakeMode) and mode.submission_conf("t", 1, {}) == {"spark.fake.tag": "t"}
    assert application_id_of("fake", "fake-123456") == "fake-123456"
    assert names_cluster_driver("fake-123456")
    tail = OutputTail()
    tail.add("submitted fake-123456")
    assert tail.application_id == "fake-123456"


def test_the_deploy_modes_import_no_airflow():
    # The supervisor (python -m, no Airflow) asks the registry whether an id names a cluster driver.
    code = (
        "import sys, airflow_jrs.launch.deploy_modes, airflow_jrs.launch.supervisor; "
        "print(sorted(m for m in sys.modules if m == 'airflow' or m.startswith('airflow.')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_every_deploy_mode_is_in_the_lists_people_read():
    # The README's layout and docs/recovery.md's "What each deploy mode supports" are written by
    # hand (a table of guarantees is no generated list); a new mode must not be missing from them.
    import re
    import sys
    from pathlib import Path

    from airflow_jrs.launch.deploy_modes.registry import MODES

    root = Path(__file__).resolve().parents[2]
    layout = (root / "README.md").read_text()
    recovery = (root / "docs" / "recovery.md").read_text()
    table = recovery.split("## What each deploy mode supports", 1)[1].split("\n\n", 2)[1]
    rows = [line.split("|")[1].strip().lower() for line in table.splitlines()[2:] if line.startswith("|")]
    for mode in MODES:
        module = Path(sys.modules[mode.__module__].__file__ or "").name
        assert re.search(rf"\b{re.escape(module)}\b", layout), f"README's layout names no {module} ({mode.__name__})"
        assert any(row.startswith(mode.kind) for row in rows), (
            f"docs/recovery.md's 'What each deploy mode supports' has no row for {mode.kind!r}: {rows}"
        )
