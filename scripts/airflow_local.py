"""A local Airflow with the provider, like ``airflow standalone``, until Ctrl-C.

    ./.venv/bin/python scripts/airflow_local.py [--dags-folder DIR] [--namespace NS]
        [--port 8080] [--parallelism 2] [--redis-url URL] [--home DIR] [--spark-master local[2]]

Starts a redis-server (append-only, data in ``data/redis``, the demo's), then api-server,
scheduler, dag-processor and triggerer (LocalExecutor, SQLite in ``data/airflow-local``), and
prints the UI's URL and the admin password. Ctrl-C stops everything.

Which DAGs: ``--dags-folder``, else ``$AIRFLOW__CORE__DAGS_FOLDER``, else the project's ``dags/``.
Which store namespace: ``--namespace``, else ``$AIRFLOW__JRS__NAMESPACE``, else ``jrs-demo``, shared
with ``./dev demo``: dates the demo computed are committed here too (trigger one from the UI: no
Spark starts). Use a namespace of your own for your own DAGs, so that they never skip because of
someone else's results.

Every component gets the connection ``jrs_default`` (the store), ``spark_local`` (Spark in local
mode, ``--spark-master``) and ``[jrs] output_root``/``spec_root`` under ``data/``; Spark event
logs go to ``data/spark-events`` (one file per launched application). Your own environment is
passed on (``AIRFLOW_CONN_*``, ``AIRFLOW__*`` for anything not listed here), so DAGs that need
more connections work as in your Airflow.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
PROJECT_DAGS = ROOT / "dags"
#: The demo's namespace: results of ``./dev demo`` are committed in this Airflow too.
DEFAULT_NAMESPACE = "jrs-demo"


def _stop_on_sigterm(*_: object) -> None:
    raise KeyboardInterrupt


def _saved_password(home: Path, username: str) -> str | None:
    try:
        return json.loads((home / "passwords.json").read_text()).get(username)
    except (OSError, ValueError):
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=None, help="API/UI port (default: a free port)")
    parser.add_argument("--parallelism", type=int, default=2, help="executor slots (default 2)")
    parser.add_argument("--redis-url", default=None, help="use this Redis instead of starting one")
    parser.add_argument("--home", default=str(DATA / "airflow-local"), help="AIRFLOW_HOME (kept between starts)")
    parser.add_argument("--spark-master", default="local[2]", help="master of the spark_local connection")
    parser.add_argument(
        "--dags-folder",
        default=os.environ.get("AIRFLOW__CORE__DAGS_FOLDER") or str(PROJECT_DAGS),
        help="your DAG folder (default: $AIRFLOW__CORE__DAGS_FOLDER, else the project's dags/)",
    )
    parser.add_argument(
        "--namespace",
        default=os.environ.get("AIRFLOW__JRS__NAMESPACE") or DEFAULT_NAMESPACE,
        help=f"job result store namespace (default: $AIRFLOW__JRS__NAMESPACE, else {DEFAULT_NAMESPACE!r}, "
        "shared with ./dev demo)",
    )
    args = parser.parse_args()
    dags_folder = Path(args.dags_folder).expanduser().resolve()
    if not dags_folder.is_dir():
        parser.error(f"--dags-folder {dags_folder} is not a folder")
    namespace = args.namespace

    sys.path.insert(0, str(ROOT))
    from airflow_jrs.store import validate_namespace
    from jrs_testbench.deployment import DeploymentError, LocalDeployment
    from jrs_testbench.helpers import jrs_env
    from jrs_testbench.redis_server import EmbeddedRedis

    try:
        validate_namespace(namespace)
    except ValueError as exc:
        parser.error(str(exc))

    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    home = Path(args.home)
    server = None
    deployment = None
    try:
        if not args.redis_url:
            server = EmbeddedRedis(DATA / "redis").start()
            print(f"redis-server on port {server.port} (append-only, data in {DATA / 'redis'})", flush=True)
        redis_url = args.redis_url or server.url  # type: ignore[union-attr]
        env = jrs_env(
            redis_url, namespace, data_dir=DATA, spark_master=args.spark_master, event_log_dir=DATA / "spark-events"
        )
        # The deployment sets AIRFLOW__CORE__DAGS_FOLDER itself, from its one DAG bundle.
        deployment = LocalDeployment(
            home,
            bundles={"dags-folder": dags_folder},
            env=env,
            parallelism=args.parallelism,
            api_port=args.port,
            password=_saved_password(home, "admin"),
        )
        print(f"Starting Airflow in {home} (logs in {deployment.log_dir}) ...", flush=True)
        started = time.monotonic()
        deployment.start()
        project_dags = dags_folder == PROJECT_DAGS.resolve()
        if project_dags:
            deployment.wait_for_dag("flights_daily")
        airflow = f"AIRFLOW_HOME={home} {Path(sys.executable).parent / 'airflow'}"
        print(
            f"\nAirflow is up after {time.monotonic() - started:.0f}s.\n"
            f"  UI:       {deployment.url}\n"
            f"  user:     {deployment.username}\n"
            f"  password: {deployment.password}\n"
            f"  DAGs:     {dags_folder}\n"
            f"  store:    {redis_url} namespace {namespace!r} "
            f"(airflow-jrs --redis-url {redis_url} --namespace {namespace} list)",
            flush=True,
        )
        if project_dags:
            print(
                "Unpause flights_daily and trigger a 2013 date (or use the UI's Backfill dialog), or:\n"
                f"  {airflow} backfill create "
                "--dag-id flights_daily --from-date 2013-01-01 --to-date 2013-01-03 --reprocess-behavior completed",
                flush=True,
            )
        else:
            print(
                "Your DAGs appear in the UI once the dag-processor has parsed them (up to 30 s; parse errors\n"
                f"show above the DAG list, or: {airflow} dags list-import-errors). Spark connection: spark_local.",
                flush=True,
            )
        print("Ctrl-C stops everything.", flush=True)
        while True:
            time.sleep(2)
            deployment.check_alive()
    except KeyboardInterrupt:
        print("\nStopping ...", flush=True)
    except DeploymentError as exc:  # a taken port, a component that keeps dying: say it, no traceback
        print(f"airflow_local: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        if deployment is not None:
            deployment.stop()
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
