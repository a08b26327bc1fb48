"""What every process of a local deployment shares: secrets, Airflow config, DAG bundles.

Kept apart from the process supervision (:mod:`.local`) because it is pure: the same inputs
give the same environment, which the tests check without starting Airflow. The connections
and paths of the project's DAGs come from :func:`jrs_testbench.helpers.jrs_env`, passed in as
``extra_env``.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: ``[database] sql_alchemy_connect_args`` for SQLite: wait up to 30 s for a lock instead of
#: failing at once with "database is locked" (the scheduler, api-server, triggerer and task
#: processes all write; with the 5 s default a busy scheduler loop makes API calls fail).
SQLITE_CONNECT_ARGS: dict[str, Any] = {"timeout": 30}
#: The same wait for the API server's async engine (aiosqlite hands it to :func:`sqlite3.connect`):
#: ``[database] sql_alchemy_connect_args_async``, whose default is SQLite's 5 s.
SQLITE_ASYNC_CONNECT_ARGS: dict[str, Any] = {"timeout": 30}
SIMPLE_AUTH_MANAGER = "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
LOCAL_BUNDLE = "airflow.dag_processing.bundles.local.LocalDagBundle"


def shared_keys(home: Path) -> dict[str, str]:
    """Secrets shared by all components, kept in the home: a kept home restarts with the
    same Fernet key (encrypted connections and trigger kwargs stay readable)."""
    path = home / ".jrs-keys.json"
    try:
        keys = json.loads(path.read_text())
        if isinstance(keys, dict) and {"fernet_key", "jwt_secret", "api_secret_key"} <= set(keys):
            return {k: str(v) for k, v in keys.items()}
    except (OSError, ValueError):
        pass
    keys = {
        "fernet_key": base64.urlsafe_b64encode(os.urandom(32)).decode(),
        "jwt_secret": secrets.token_urlsafe(32),
        "api_secret_key": secrets.token_urlsafe(24),
    }
    home.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(keys))
    path.chmod(0o600)
    return keys


def component_env(
    *,
    home: Path,
    bundles: Mapping[str, str],
    url: str,
    api_port: int,
    sql_alchemy_conn: str,
    parallelism: int,
    username: str,
    log_level: str,
    extra_env: Mapping[str, str],
    log_server_ports: Mapping[str, int] | None = None,
) -> dict[str, str]:
    """The environment of every component: ours (below) over ``os.environ``, ``extra_env`` last.

    ``log_server_ports`` (``worker``, ``trigger``): where the scheduler's and the triggerer's log
    servers listen; Airflow's defaults (8793, 8794) would be shared by every Airflow on the machine.
    """
    bundle_list = [
        {"name": name, "classpath": LOCAL_BUNDLE, "kwargs": {"path": path}} for name, path in bundles.items()
    ]
    first = next(iter(bundles.values()))
    keys = shared_keys(home)
    airflow_env = {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": str(parallelism),
        "AIRFLOW__CORE__DEFAULT_POOL_TASK_SLOT_COUNT": str(parallelism),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": first,
        "AIRFLOW__CORE__FERNET_KEY": keys["fernet_key"],
        "AIRFLOW__CORE__AUTH_MANAGER": SIMPLE_AUTH_MANAGER,
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{username}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{url}/execution/",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": sql_alchemy_conn,
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(api_port),
        "AIRFLOW__API__BASE_URL": url,
        "AIRFLOW__API__WORKERS": "1",
        # A database error's text in the API's answer, not just a lookup id into the api-server's
        # log (gone with the home): the client retries exactly "database is locked" (rest.py).
        "AIRFLOW__API__EXPOSE_STACKTRACE": "True",
        "AIRFLOW__API__SECRET_KEY": keys["api_secret_key"],
        "AIRFLOW__API_AUTH__JWT_SECRET": keys["jwt_secret"],
        "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps(bundle_list),
        "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "30",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": log_level,
        "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
    }
    for kind, port in (log_server_ports or {}).items():
        airflow_env[f"AIRFLOW__LOGGING__{kind.upper()}_LOG_SERVER_PORT"] = str(port)
    if sql_alchemy_conn.startswith("sqlite"):
        airflow_env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS"] = f"{__name__}.SQLITE_CONNECT_ARGS"
        airflow_env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS_ASYNC"] = f"{__name__}.SQLITE_ASYNC_CONNECT_ARGS"
    elif sql_alchemy_conn.startswith("postgresql+psycopg:") and not os.environ.get(
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC"
    ):
        # psycopg 3 is sync and async; Airflow would otherwise derive an asyncpg URL.
        airflow_env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC"] = sql_alchemy_conn
    env = dict(os.environ)
    env.update(airflow_env)
    for key, value in extra_env.items():
        if key.startswith("AIRFLOW__") and key in airflow_env and key not in ("AIRFLOW__LOGGING__LOGGING_LEVEL",):
            # Overriding what makes the deployment coherent is allowed, but say so.
            print(f"[jrs-deployment] overriding {key}", file=sys.stderr)
        env[key] = value
    return env
