"""One task attempt of JrsSparkSubmitOperator in its own process, so chaos tests can kill it.

It runs the operator's real execute() (store, lease, intent, spark-submit, result) with the
context an Airflow worker would pass for dag ``chaos``, task ``submit``, 2013-01-01.
Prints ``RESULT <json>`` on success or ``ERROR <exception class> <message>``; exit 0 / 1.

usage: attempt.py --app-sleep S [--lease-wait S] [--run-id R] [--try-number N] [--cleanup]
Environment: JRS_FAULT_KILL_AT, AIRFLOW_CONN_JRS_DEFAULT, AIRFLOW_CONN_SPARK_LOCAL, AIRFLOW__JRS__*,
JRS_TEST_SPARK_CONF; the repository on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import UTC, datetime
from types import SimpleNamespace

from jrs_testbench.helpers import TINY_APP

DAY = datetime(2013, 1, 1, tzinfo=UTC)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--app-sleep", type=float, default=0.0)
    parser.add_argument("--lease-wait", type=float, default=0.0)
    parser.add_argument("--run-id", default="scheduled__2013-01-01")
    parser.add_argument("--try-number", type=int, default=1)
    parser.add_argument("--cleanup", action="store_true", help="run JrsCleanupOperator for the job instead")
    parser.add_argument("--app", help="another application than tiny_app (its arguments: --app-args)")
    parser.add_argument("--app-args", default="[]", help="JSON list of the application's arguments")
    parser.add_argument("--predecessor", default="wait")
    args = parser.parse_args()
    from airflow_jrs.operators import JrsCleanupOperator, JrsSparkSubmitOperator
    from jrs_testbench.faults import install_from_env

    install_from_env()  # JRS_FAULT_KILL_AT=<step>: SIGKILL at that step of the operator

    if args.cleanup:
        cleanup = JrsCleanupOperator(task_id="cleanup", jobs=["chaos.submit.2013-01-01"], initial_backoff=0.1)
        ti = SimpleNamespace(dag_id="chaos", task_id="cleanup", try_number=args.try_number, map_index=-1)
        try:
            committed = cleanup.execute({"ti": ti, "run_id": args.run_id, "outlet_events": {}})
        except BaseException as exc:
            print(f"ERROR {type(exc).__name__} {exc}", flush=True)
            return 1
        print("RESULT " + json.dumps(committed, default=str), flush=True)
        return 0

    app_args = ["--output", "{jrs_output}", "--sleep", str(args.app_sleep), *json.loads(args.app_args)]
    op = JrsSparkSubmitOperator(
        task_id="submit",
        application=args.app or TINY_APP,
        application_args=app_args,
        conn_id="spark_local",
        conf=json.loads(os.environ.get("JRS_TEST_SPARK_CONF", "{}")),
        lease_wait_timeout=args.lease_wait,
        predecessor=args.predecessor,
    )
    ti = SimpleNamespace(
        dag_id="chaos", task_id="submit", try_number=args.try_number, map_index=-1, xcom_push=lambda **kw: None
    )
    context = {"ti": ti, "run_id": args.run_id, "data_interval_start": DAY, "logical_date": DAY}
    try:
        result = op.execute(context)
    except BaseException as exc:
        print(f"ERROR {type(exc).__name__} {exc}", flush=True)
        return 1
    print("RESULT " + json.dumps(result, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
