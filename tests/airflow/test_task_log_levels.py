"""A healthy ``@task.jrs_pyspark`` compute logs no ERROR or WARNING line.

Airflow 3's supervisor logs every line a task process writes to its stderr as an ERROR
(``task.stderr`` in ``airflow.sdk.execution_time.supervisor``), and the task's log records at
their own level. So the rule is checked on a real task process (a child Python running
``JrsPySparkOperator.execute``, what ``@task.jrs_pyspark`` builds, with a task context) that
computes a job on a real local SparkSession and a real Redis: its stderr stays empty, and none of
its log records is a WARNING or worse. The driver JVM's start-up chatter (incubator modules,
log4j's banner, NativeCodeLoader, progress bars) used to be about eight ERROR lines per compute.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.airflow, pytest.mark.spark]

HERE = Path(__file__).resolve().parent
#: A record at WARNING or worse, as logging's format below or Airflow's structlog console prints it.
HARNESS = "cannot be called outside of the Task Runner"
LOUD = re.compile(r"^(WARNING|ERROR|CRITICAL) |\[(warning|error|critical|exception)\s*\]", re.IGNORECASE)
#: The task process: the operator computes once; every log record goes to stdout as LEVEL name: message.
TASK_PROCESS = """
import json, logging, sys
logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
sys.path.insert(0, sys.argv[1])
import test_pyspark_task as t
from airflow_jrs.operators.pyspark import JrsPySparkOperator
op = JrsPySparkOperator(
    task_id="t", python_callable=t.count_rows, op_kwargs={"rows": t.ROWS, "control": sys.argv[2]},
    conn_id="spark_local", config_kwargs=json.loads(sys.argv[3]), outputs={"data": "data"},
)
print("PAYLOAD " + json.dumps(op.execute(t.context())), flush=True)
"""


def test_a_healthy_compute_writes_nothing_to_stderr_and_logs_nothing_above_info(jrs_env, tmp_path):
    control = tmp_path / "control"
    control.mkdir()
    # The session's conf as a user's task has it: Spark's UI and progress bars at their defaults.
    conf = {k: v for k, v in jrs_env.spark_conf().items() if k != "spark.ui.enabled"}
    done = subprocess.run(
        [sys.executable, "-c", TASK_PROCESS, str(HERE), str(control), json.dumps(conf)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (payload,) = [json.loads(line[8:]) for line in done.stdout.splitlines() if line.startswith("PAYLOAD ")]
    assert payload["status"] == "SUCCEEDED" and payload["reused"] is False and jrs_env.launches() == 1

    assert done.stderr == "", "Airflow logs each of these lines as an ERROR:\n" + done.stderr[-3000:]
    # Airflow's own note that this harness calls execute() without its task runner is left out.
    loud = [line for line in done.stdout.splitlines() if LOUD.search(line) and HARNESS not in line]
    assert loud == []
    # The driver JVM did speak, and its lines reached the task's log, quieter.
    assert [line for line in done.stdout.splitlines() if "driver JVM: " in line and "NativeCodeLoader" in line]
