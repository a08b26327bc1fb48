"""The Spark provider's own SparkSubmitOperator tests, run on the provider's operator and on ours.

    .venv/bin/python scripts/provider_suite.py [--cache DIR] [--keep]

Downloads the pinned provider sdist (scripts/provider_suite.lock: version and sha256) into a cache
folder (default build/provider-suite; nothing of it is committed), takes its
``tests/unit/apache/spark/operators/test_spark_submit.py`` and runs it twice with this venv:

* as shipped (the provider's ``SparkSubmitOperator``);
* with ``SparkSubmitOperator`` replaced by a thin subclass of ``JrsSparkSubmitOperator``, against
  a real redis-server started here (the ``jrs_default`` connection).

It then compares the outcomes test by test: every test that passes for the provider must pass
for ours, unless :data:`BY_DESIGN` names it with the reason. Exit status 1 otherwise.

Why not ``apache-airflow-devel-common`` from PyPI: its only release (0.1.1, 2025-05) predates the
6.3.4 tests (no ``tests_common.test_utils.dag``, ``.taskinstance`` nor ``AIRFLOW_V_3_3_PLUS``) and
its pytest plugin runs ``uv run`` on scripts of Airflow's own repository at import. The three
helpers the test file imports are replaced here by stand-ins (:data:`SHIMS`) that skip the two
tests needing Airflow's test database fixtures on both sides alike.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = Path(__file__).with_suffix(".lock")
TEST_FILE = "tests/unit/apache/spark/operators/test_spark_submit.py"

#: Tests that pass for the provider and not for ours, each with why that is by design.
_GUARDED_EXECUTE = (
    "calls execute() with a bare context and a mocked hook: the guarded execute needs the task "
    "instance (the job id, the attempt) and each launch builds its own hook (a per-launch copy of the "
    "operator); a retry's reattach goes through the job's intent (tests/airflow/test_durable_reattach.py)"
)
BY_DESIGN: dict[str, str] = (
    {
        f"TestSparkSubmitOperatorResumable::{name}": _GUARDED_EXECUTE
        for name in (
            "test_non_cluster_mode_calls_hook_submit_directly",
            "test_cluster_mode_first_run_persists_id_before_polling",
            "test_retry_behaviour_based_on_prior_driver_status[RUNNING-False-driver-001]",
            "test_retry_behaviour_based_on_prior_driver_status[SUBMITTED-False-driver-001]",
            "test_retry_behaviour_based_on_prior_driver_status[FINISHED-False-None]",
            "test_retry_behaviour_based_on_prior_driver_status[FAILED-True-driver-new]",
            "test_retry_behaviour_based_on_prior_driver_status[KILLED-True-driver-new]",
            "test_submits_fresh_when_task_state_store_unavailable",
            "test_durable_false_submits_fresh_and_polls",
            "test_yarn_first_run_persists_app_id_before_polling",
            "test_yarn_retry_reconnects_to_running_app",
            "test_yarn_retry_skips_already_succeeded_app",
            "test_yarn_retry_resubmits_after_failed_app",
            "test_yarn_cluster_reconnect_without_rm_api_raises",
            "test_yarn_cluster_without_rm_api_reconnect_false_falls_through_to_hook_submit",
        )
    }
    | {
        f"TestSparkSubmitOperatorK8sTracking::{name}": _GUARDED_EXECUTE
        for name in (
            "test_execute_calls_submit_then_poll_when_flag_set",
            "test_execute_falls_through_to_plain_submit_when_flag_off",
            "test_k8s_execute_persists_pod_id_when_durable",
            "test_k8s_execute_durable_false_does_not_persist_pod_id",
        )
    }
    | {
        # They pass for the provider once the openlineage provider is installed (airflow-jrs[openlineage]).
        f"TestSparkSubmitOperator::{name}": (
            "calls execute() with a bare context and a mocked hook, then reads operator.conf: the guarded "
            "execute needs the task instance, and the provider's own execute injects the spark.openlineage.* "
            "conf into each launch's copy of the operator, never the task's (spark_launcher.py: nothing of a "
            "launch is written onto the task's operator); tests/airflow/test_lineage.py reads what each "
            "application received from its event log"
        )
        for name in (
            "test_inject_simple_openlineage_config_to_spark",
            "test_inject_composite_openlineage_config_to_spark",
            "test_inject_openlineage_simple_config_wrong_transport_to_spark",
            "test_inject_openlineage_composite_config_wrong_transport_to_spark",
        )
    }
)

_SKIP = "def _skip(*args, **kwargs):\n    import pytest\n\n    pytest.skip('needs Airflow test database fixtures')\n"
#: Stand-ins for what the test file imports from Airflow's devel-common (module docstring).
SHIMS = {
    "tests_common/__init__.py": "",
    "tests_common/test_utils/__init__.py": "",
    "tests_common/test_utils/version_compat.py": (
        "from airflow_jrs.compat import AIRFLOW_VERSION\n\n"
        "AIRFLOW_V_3_0_PLUS = AIRFLOW_VERSION >= (3, 0, 0)\nAIRFLOW_V_3_3_PLUS = AIRFLOW_VERSION >= (3, 3, 0)\n"
    ),
    "tests_common/test_utils/dag.py": _SKIP + "\n\nsync_dag_to_db = _skip\n",
    "tests_common/test_utils/taskinstance.py": _SKIP + "\n\ncreate_task_instance = render_template_fields = _skip\n",
    "conftest.py": (
        "import pytest\n\n\n@pytest.fixture\ndef session():\n"
        "    pytest.skip('needs Airflow test database fixtures')\n\n\n"
        "testing_dag_bundle = create_task_instance_of_operator = session\n"
    ),
    "jrs_subclass.py": (
        "from airflow_jrs.operators import JrsSparkSubmitOperator\n\n\n"
        "class SparkSubmitOperator(JrsSparkSubmitOperator):\n"
        '    """The provider\'s tests against the guarded operator."""\n'
    ),
}
_PROVIDER_IMPORT = "from airflow.providers.apache.spark.operators.spark_submit import (\n    SparkSubmitOperator,\n)"


def _pinned() -> tuple[str, str]:
    lock = dict(line.split("=", 1) for line in LOCK.read_text().split() if "=" in line)
    return lock["apache-airflow-providers-apache-spark"], lock["sha256"]


def fetch_tests(cache: Path) -> Path:
    """The pinned sdist's test file, downloaded once into ``cache`` and checked against the lock."""
    version, sha = _pinned()
    name = f"apache_airflow_providers_apache_spark-{version}"
    sdist = cache / f"{name}.tar.gz"
    if not sdist.exists():  # through pip, the registry's ordinary client (its index settings apply)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-d", str(cache),
             f"apache-airflow-providers-apache-spark=={version}"],
            check=True,
        )  # fmt: skip
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    if digest != sha:
        raise SystemExit(f"{sdist}: sha256 {digest}, the lock says {sha}; delete it and run again")
    target = cache / name / TEST_FILE
    if not target.exists():
        with tarfile.open(sdist) as tar:
            tar.extract(f"{name}/{TEST_FILE}", cache, filter="data")
    return target


def run_side(test_file: Path, workdir: Path, *, ours: bool, env: dict[str, str]) -> dict[str, str]:
    """Run one side in ``workdir``; {test id: outcome} from pytest's JUnit report."""
    workdir.mkdir(parents=True, exist_ok=True)
    for rel, text in SHIMS.items():
        (workdir / rel).parent.mkdir(parents=True, exist_ok=True)
        (workdir / rel).write_text(text)
    source = test_file.read_text()
    if ours:
        assert _PROVIDER_IMPORT in source, "the test file no longer imports SparkSubmitOperator as pinned"
        source = source.replace(_PROVIDER_IMPORT, "from jrs_subclass import SparkSubmitOperator")
    (workdir / "test_spark_submit.py").write_text(source)
    report = workdir / "report.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", f"--junitxml={report}",
         "--rootdir", str(workdir), "-c", os.devnull, "test_spark_submit.py"],
        cwd=workdir, env={**env, "PYTHONPATH": f"{workdir}{os.pathsep}{env.get('PYTHONPATH', '')}"},
        check=False, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    return _outcomes(report)


def _outcomes(report: Path) -> dict[str, str]:
    import xml.etree.ElementTree as ET

    out = {}
    for case in ET.parse(report).iter("testcase"):
        test_id = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        kinds = {child.tag for child in case}
        out[test_id] = "failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed"
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--cache", type=Path, default=ROOT / "build" / "provider-suite")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from jrs_testbench.redis_server import EmbeddedRedis

    test_file = fetch_tests(args.cache)
    with tempfile.TemporaryDirectory(prefix="provider-suite-") as tmp, EmbeddedRedis(Path(tmp) / "redis") as redis:
        env = {
            **os.environ,
            "AIRFLOW_HOME": str(Path(tmp) / "airflow"),
            "AIRFLOW_CONN_JRS_DEFAULT": f"{redis.url}?namespace=provider-suite",
            "AIRFLOW__JRS__OUTPUT_ROOT": str(Path(tmp) / "output"),
            "AIRFLOW__JRS__SPEC_ROOT": str(Path(tmp) / "specs"),
        }
        parent = run_side(test_file, Path(tmp) / "parent", ours=False, env=env)
        ours = run_side(test_file, Path(tmp) / "ours", ours=True, env=env)
    for name, side in (("provider", parent), ("airflow-jrs", ours)):
        counts = {k: sum(v == k for v in side.values()) for k in ("passed", "failed", "skipped")}
        print(f"{name}: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
    regressions = sorted(
        t for t, o in parent.items() if o == "passed" and ours.get(t) != "passed" and t not in BY_DESIGN
    )
    # Stale: gone from the suite, or passing on both sides. On an older Airflow the provider's
    # own test may fail or skip (3.1 lacks what its durable tests need): nothing to judge there.
    stale = sorted(t for t in BY_DESIGN if t not in parent or parent[t] == ours.get(t) == "passed")
    differences = sum(parent.get(t) == "passed" and ours.get(t) != "passed" for t in BY_DESIGN)
    print(f"differences by design: {differences} (scripts/provider_suite.py BY_DESIGN)")
    for test_id in regressions:
        print(f"REGRESSION: passes for the provider, not for airflow-jrs: {test_id}")
    for test_id in stale:
        print(f"STALE: BY_DESIGN names {test_id}, which is no longer a difference: drop it")
    return 1 if regressions or stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
