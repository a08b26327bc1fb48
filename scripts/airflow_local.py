"""A local Airflow with the provider, like ``airflow standalone``, until Ctrl-C.

    ./.venv/bin/python scripts/airflow_local.py [--dags-folder DIR] [--namespace NS]
        [--port 8080] [--parallelism 2] [--redis-url URL] [--home DIR] [--spark-master local[2]]

Starts a redis-server (append-only, data in ``data/redis``, the demo's), then api-server,
scheduler, dag-processor and triggerer (LocalExecutor, SQLite in ``data/airflow-local``), and
prints the UI's URL and the admin password. Ctrl-C stops everything.

What stays put between starts of one home, so that printed commands keep working: the
redis-server's port (picked once, kept in ``<home>/.jrs-redis-port``), the admin password, the
keys. The home's ``airflow.cfg`` is for the ``airflow`` CLI run with only ``AIRFLOW_HOME`` set
(the components take their settings from the environment): it names this start's DAG folder and
has ``load_examples = False``, so such a command sees the deployment's DAGs, not Airflow's examples.

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
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
PROJECT_DAGS = ROOT / "dags"
#: The demo's namespace: results of ``./dev demo`` are committed in this Airflow too.
DEFAULT_NAMESPACE = "jrs-demo"


def _stop_on_sigterm(*_: object) -> None:
    raise KeyboardInterrupt


#: The redis-server's port of one home, chosen at its first start and reused after.
REDIS_PORT_FILE = ".jrs-redis-port"


def kept_redis_port(home: Path) -> int:
    """The home's redis-server port: the kept one, else a free port, kept from now on.

    A new port per start would change the ``airflow-jrs --redis-url ...`` line printed at every
    start (and break a connection a user saved from it); the data directory is the same anyway.
    """
    from jrs_testbench.helpers import free_port

    path = home / REDIS_PORT_FILE
    try:
        port = int(path.read_text().strip())
        if 0 < port < 65536:
            return port
    except (OSError, ValueError):
        pass
    port = free_port()
    home.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{port}\n")
    return port


def start_redis(home: Path, data_dir: Path) -> Any:
    """An ``EmbeddedRedis`` on the home's kept port, started; ``SystemExit`` naming who holds it if taken."""
    from jrs_testbench.deployment.processes import port_holder
    from jrs_testbench.redis_server import EmbeddedRedis, PortTaken

    port = kept_redis_port(home)

    def taken(holder: str) -> SystemExit:
        return SystemExit(
            f"airflow_local: port {port}, the redis-server port kept for {home} in {home / REDIS_PORT_FILE}, "
            f"is taken by {holder}: stop that process (a redis-server left from an earlier start of this "
            f"home serves the same data), or delete {home / REDIS_PORT_FILE} to pick a new port"
        )

    holder = port_holder(port)  # checked first: a server that is not Redis would not answer a PING
    if holder:
        raise taken(holder)
    try:
        return EmbeddedRedis(data_dir, port=port).start()
    except PortTaken as exc:  # taken between the check and the bind
        raise taken(port_holder(port) or str(exc).splitlines()[0]) from None


def write_cli_config(home: Path, dags_folder: Path) -> Path:
    """Set ``[core] dags_folder`` and ``load_examples = False`` in the home's ``airflow.cfg``.

    The components get every setting from their environment; the file is what ``AIRFLOW_HOME=<home>
    airflow ...`` reads. Airflow writes it with its defaults (``load_examples = True``, ``dags_folder
    = <home>/dags``), so such a command would parse Airflow's example DAGs and not ours. Only those
    two lines are changed (an existing file keeps its comments and every other value); a missing
    file gets just them, and Airflow's defaults apply to the rest.
    """
    wanted = {"dags_folder": str(dags_folder), "load_examples": "False"}
    path = home / "airflow.cfg"
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        lines = [
            "# The airflow CLI's settings for this home (scripts/airflow_local.py); the components'",
            "# come from their environment. Airflow's defaults apply to everything not set here.",
        ]
    section, seen, out = "", set(), []
    for line in lines:
        header = re.match(r"\s*\[([^\]]+)\]", line)
        if header:
            if section == "core":
                out.extend(f"{k} = {v}" for k, v in wanted.items() if k not in seen)
                seen.update(wanted)
            section = header.group(1).strip()
        key = re.match(r"([A-Za-z_]+)\s*=", line)
        if section == "core" and key and key.group(1) in wanted:
            line = f"{key.group(1)} = {wanted[key.group(1)]}"
            seen.add(key.group(1))
        out.append(line)
    if section == "core":
        out.extend(f"{k} = {v}" for k, v in wanted.items() if k not in seen)
        seen.update(wanted)
    if not seen >= set(wanted):
        out.extend(["", "[core]", *(f"{k} = {v}" for k, v in wanted.items())])
    home.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(out) + "\n")
    return path


def _saved_password(home: Path, username: str) -> str | None:
    try:
        return json.loads((home / "passwords.json").read_text()).get(username)
    except (OSError, ValueError):
        return None


def build_parser() -> argparse.ArgumentParser:
    """The command line; apart from :func:`main` so the docs' commands can be checked against it."""
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
    return parser


def main() -> int:
    parser = build_parser()
    args = parser.parse_args()
    dags_folder = Path(args.dags_folder).expanduser().resolve()
    if not dags_folder.is_dir():
        parser.error(f"--dags-folder {dags_folder} is not a folder")
    namespace = args.namespace

    sys.path.insert(0, str(ROOT))
    from airflow_jrs.store import validate_namespace
    from jrs_testbench.deployment import DeploymentError, LocalDeployment
    from jrs_testbench.helpers import jrs_env

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
            server = start_redis(home, DATA / "redis")
            print(
                f"redis-server on port {server.port} (kept in {home / REDIS_PORT_FILE}; "
                f"append-only, data in {DATA / 'redis'})",
                flush=True,
            )
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
        write_cli_config(home, dags_folder)  # after start: Airflow has written its defaults by now
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
