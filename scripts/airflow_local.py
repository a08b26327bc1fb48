"""A local Airflow with the provider, like ``airflow standalone``, until Ctrl-C.

    ./.venv/bin/python scripts/airflow_local.py [--port 8080] [--parallelism 2] [--redis-url URL]

Starts a redis-server (append-only, data in ``data/redis``, the demo's), then api-server,
scheduler, dag-processor and triggerer (LocalExecutor, SQLite in ``data/airflow-local``) with
the project's ``dags/``, and prints the UI's URL and the admin password. Results live in the
store namespace ``demo``, shared with ``./dev demo``: dates the demo computed are committed
here too (trigger one from the UI: no Spark starts). Spark runs in local mode; event logs go
to ``data/spark-events`` (one file per launched application). Ctrl-C stops everything.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
NAMESPACE = "demo"


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
    parser.add_argument("--spark-master", default="local[2]")
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT))
    from jrs_testbench.deployment import LocalDeployment
    from jrs_testbench.helpers import jrs_env
    from jrs_testbench.redis_server import EmbeddedRedis

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
            redis_url, NAMESPACE, data_dir=DATA, spark_master=args.spark_master, event_log_dir=DATA / "spark-events"
        )
        deployment = LocalDeployment(
            home,
            env=env,
            parallelism=args.parallelism,
            api_port=args.port,
            password=_saved_password(home, "admin"),
        )
        print(f"Starting Airflow in {home} (logs in {deployment.log_dir}) ...", flush=True)
        started = time.monotonic()
        deployment.start()
        deployment.wait_for_dag("flights_daily")
        print(
            f"\nAirflow is up after {time.monotonic() - started:.0f}s.\n"
            f"  UI:       {deployment.url}\n"
            f"  user:     {deployment.username}\n"
            f"  password: {deployment.password}\n"
            f"  store:    {redis_url} namespace {NAMESPACE!r} "
            f"(airflow-jrs --redis-url {redis_url} --namespace {NAMESPACE} list)\n"
            "Unpause flights_daily and trigger a 2013 date (or use the UI's Backfill dialog), or:\n"
            f"  AIRFLOW_HOME={home} {Path(sys.executable).parent / 'airflow'} backfill create "
            "--dag-id flights_daily --from-date 2013-01-01 --to-date 2013-01-03 --reprocess-behavior completed\n"
            "Ctrl-C stops everything.",
            flush=True,
        )
        while True:
            time.sleep(2)
            deployment.check_alive()
    except KeyboardInterrupt:
        print("\nStopping ...", flush=True)
    finally:
        if deployment is not None:
            deployment.stop()
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
