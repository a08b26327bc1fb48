"""An auth manager that scopes a user to one DAG, for tests of who may read what.

Airflow's SimpleAuthManager gives a role to every DAG alike; the FAB provider's auth manager can
scope DAGs per user but is a provider of its own. This one is Airflow's SimpleAuthManager
(Airflow's base class and its token, login and roles) with one rule more: a user named
``only.<dag_id>`` may read that one DAG and nothing else (no edit, no other DAG). Other users
are SimpleAuthManager's. Configure it as ``[core] auth_manager =
jrs_testbench.scoped_auth.DagScopedAuthManager``.
"""

from __future__ import annotations

from typing import Any

from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

#: The user-name prefix of a user scoped to one DAG (``only.<dag_id>``).
PREFIX = "only."
CLASSPATH = f"{__name__}.DagScopedAuthManager"


def scope_of(user: Any) -> str | None:
    name = user.get_name() if hasattr(user, "get_name") else getattr(user, "username", "")
    return name[len(PREFIX) :] if name.startswith(PREFIX) else None


class DagScopedAuthManager(SimpleAuthManager):
    def is_authorized_dag(self, *, method: Any, user: Any, access_entity: Any = None, details: Any = None) -> bool:
        scope = scope_of(user)
        if scope is None:
            return super().is_authorized_dag(method=method, user=user, access_entity=access_entity, details=details)
        return method == "GET" and details is not None and getattr(details, "id", None) == scope

    def filter_authorized_dag_ids(
        self, *, dag_ids: set[str], user: Any, method: Any = "GET", **kwargs: Any
    ) -> set[str]:
        scope = scope_of(user)
        if scope is None:
            return super().filter_authorized_dag_ids(dag_ids=dag_ids, user=user, method=method, **kwargs)
        return {d for d in dag_ids if d == scope and method == "GET"}


def scoped_site(work: Any, *, bundles: dict[str, Any], env: dict[str, str], user: str) -> tuple[Any, str]:
    """An api-server and dag-processor under ``work/airflow`` with this auth manager: ``admin``
    (admin) and ``user`` (a viewer, scoped when it starts with :data:`PREFIX`), whose password is
    returned with the (not yet started) ``LocalDeployment``."""
    import json
    import secrets

    from jrs_testbench.deployment import LocalDeployment

    env = {
        **env,
        "AIRFLOW__CORE__AUTH_MANAGER": CLASSPATH,
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"admin:admin,{user}:viewer",
    }
    home = work / "airflow"
    home.mkdir()
    password = secrets.token_urlsafe(12)
    (home / "passwords.json").write_text(json.dumps({user: password}))
    return LocalDeployment(home, bundles=bundles, env=env, components=("api-server", "dag-processor")), password
