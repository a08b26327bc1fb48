"""A re-run after ``kill -9`` of the task that held the job's lease, through the operator.

The killed holder is a real process that took the lease as a task would; spark-submit is a
stand-in (:mod:`jrs_testbench.fake_spark`) run under the real supervisor, so "Spark ran" is a
counted launch.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from airflow.providers.common.compat.sdk import AirflowException

from airflow_jrs.operators import JrsCleanupOperator, JrsSparkSubmitOperator
from jrs_testbench.fake_spark import install_fake_spark_submit, launches
from jrs_testbench.helpers import TINY_APP
from jrs_testbench.invariants import assert_clean_outputs_exist

pytestmark = pytest.mark.airflow

DAY = datetime(2013, 1, 1, tzinfo=UTC)
JOB = "d.t.2013-01-01"
HOLDER = """
import sys, time, redis
from airflow_jrs.store.leases.lease import default_owner
from airflow_jrs.store.redis.leases import RedisJobLease
owner = default_owner(dag_id="d", task_id="t", run_id="scheduled__2013-01-01", try_number=1)
lease = RedisJobLease(redis.Redis.from_url(sys.argv[1]), sys.argv[2], sys.argv[3], ttl=60, owner=owner)
print(lease.acquire(), flush=True)
time.sleep(600)
"""


def context(try_number: int = 1):
    ti = SimpleNamespace(dag_id="d", task_id="t", try_number=try_number, map_index=-1, xcom_push=lambda **kw: None)
    return {"ti": ti, "run_id": "scheduled__2013-01-01", "data_interval_start": DAY, "logical_date": DAY}


@pytest.fixture
def calls(tmp_path, monkeypatch):
    bin_dir, calls = install_fake_spark_submit(tmp_path, write_output=True)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return calls


@pytest.fixture
def holder(redis_url, jrs_env):
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, redis_url, jrs_env.namespace, JOB], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    proc.token = int(proc.stdout.readline())  # type: ignore[attr-defined]
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def operator(jrs_env, retries: int = 0) -> JrsSparkSubmitOperator:
    return JrsSparkSubmitOperator(
        task_id="t", application=TINY_APP, application_args=["--output", "{jrs_output}"], conn_id="spark_local",
        conf=jrs_env.spark_conf(), retries=retries,
    )  # fmt: skip


def test_a_rerun_after_kill_9_of_the_holder_takes_over_at_once_and_runs_with_retries_0(jrs_env, holder, calls, capfd):
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    payload = operator(jrs_env).execute(context())
    assert payload["status"] == "SUCCEEDED" and payload["reused"] is False
    assert launches(calls) == 1
    result = jrs_env.store.get_entry(JOB).result
    assert result.fence is not None and result.fence > holder.token
    out, err = capfd.readouterr()
    assert f"took over the lease from pid {holder.pid} on host" in out + err
    JrsCleanupOperator(task_id="cleanup", jobs=[JOB]).execute({"ti": context()["ti"], "outlet_events": {}})
    assert len(assert_clean_outputs_exist(jrs_env.store)) == 1  # what the committed entry names is there


def test_a_live_holder_is_named_with_the_time_left_and_no_retry_is_promised_on_the_last_try(jrs_env, holder, calls):
    with pytest.raises(AirflowException) as info:
        operator(jrs_env, retries=0).execute(context())
    text = str(info.value)
    assert f"pid {holder.pid} on host" in text and "expires in" in text and f"its pid {holder.pid} is alive" in text
    assert "Airflow will retry" not in text and "last try" in text
    with pytest.raises(AirflowException, match=r"Airflow will retry this task \(1 retry left\)"):
        operator(jrs_env, retries=1).execute(context(try_number=1))
    assert launches(calls) == 0
