"""The public surface is small and explicit: everything in __all__ resolves, nothing else is promised."""

from __future__ import annotations

import pytest

import airflow_jrs
import airflow_jrs.store


def test_every_name_in_all_resolves():
    for module in (airflow_jrs, airflow_jrs.store):
        for name in module.__all__:
            assert getattr(module, name) is not None, f"{module.__name__}.{name}"


def test_public_surface_is_pinned():
    assert set(airflow_jrs.__all__) == {
        "Attempt", "CleanupError", "CorruptJobResultError", "EntryState", "InvalidJobIdError",
        "JobKilledError", "JobLease", "JobResult", "JobResultEntry", "JobResultEntryAlreadyExistsError",
        "JobResultEntryChangedError", "JobResultEntryError", "JobResultQuarantinedError", "JobResultSensor",
        "JobResultStore",
        "JobResultTrigger", "JobStatus", "JrsCleanupOperator", "JrsConfigError", "JrsError", "JrsHook",
        "JrsSparkSubmitOperator", "LeaseError", "LeaseHeldError", "LeaseLostError", "NoSuchJobResultError",
        "RedisJobResultStore", "StoreUnavailableError", "UnsupportedSchemaVersionError", "__version__",
        "jrs_spark_job",
    }  # fmt: skip


def test_store_surface_is_pinned():
    assert set(airflow_jrs.store.__all__) == {
        "SCHEMA_VERSION", "Actor", "AsyncRedisJobResultStore", "Attempt", "EntryState", "HistoryNote",
        "HistoryReason", "JobNamespace", "JobResult", "JobResultEntry", "JobResultStore", "JobStatus",
        "RedisJobNamespace", "RedisJobResultStore",
        "result_from_dict", "result_to_dict", "validate_job_id", "validate_namespace",
    }  # fmt: skip


@pytest.mark.parametrize("internal", ["KeySpace"])
def test_the_store_internals_are_not_re_exported(internal: str):
    # Only the store builds Redis keys (docs/architecture.md, "Layers"): a public name would invite
    # a caller to build them too. Tests and benchmarks import it from airflow_jrs.store.redis.keys.
    assert internal not in airflow_jrs.store.__all__
    assert not hasattr(airflow_jrs.store, internal)


def test_store_package_imports_no_airflow():
    import subprocess
    import sys

    code = (
        "import sys, airflow_jrs.store, airflow_jrs.store.leases.lease, airflow_jrs.spark; "
        "print('airflow' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
