"""The API server runs no DAG code: the Job results page plans from the serialized DAG.

A real api-server and dag-processor (docs/threat-model.md, "The API server runs no DAG code").
The DAG file ``jrs_probe`` records every process that imports it and, when imported, replaces
the page's access check with one that allows everything (what a hostile DAG author could do in
the API server: its process also holds the JWT secret and the metadata DB's credentials). A user
who may read only ``jrs_probe`` (a DAG-scoped auth manager on Airflow's SimpleAuthManager:
:mod:`jrs_testbench.scoped_auth`) opens its calendar and both previews; an admin takes both
actions. The API server's processes never import the file, the calendar still shows every state
(a templated ``job_id`` with Airflow's ``macros`` rendered sandboxed), and the scoped user still
gets 403 for another DAG's job.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from airflow_jrs.store import Attempt, JobResult, JobStatus, RedisJobResultStore
from jrs_testbench.deployment import LocalDeployment
from jrs_testbench.deployment.rest import AirflowClient, ApiError
from jrs_testbench.helpers import jrs_env
from jrs_testbench.scoped_auth import PREFIX, scoped_site

pytestmark = pytest.mark.airflow

DAGS = Path(__file__).parent / "no_dag_code_dags"
SCOPED = f"{PREFIX}jrs_probe"


@pytest.fixture(scope="module")
def site(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    work = tmp_path_factory.mktemp("no-dag-code")
    namespace = f"ndc-{uuid.uuid4().hex[:8]}"
    imports = work / "imports.log"
    env = {**jrs_env(redis_url, namespace, data_dir=work / "data"), "JRS_IMPORT_LOG": str(imports)}
    airflow, password = scoped_site(work, bundles={"ndc": DAGS}, env=env, user=SCOPED)
    store = RedisJobResultStore(redis_url, namespace)
    with airflow:
        airflow.wait_for_dag("jrs_probe")
        airflow.wait_for_dag("jrs_other")
        scoped = AirflowClient(airflow.url, SCOPED, password)
        yield {"airflow": airflow, "store": store, "imports": imports, "scoped": scoped}
    store.client.close()


def _api_server_pids(airflow: LocalDeployment) -> set[int]:
    root = psutil.Process(airflow._procs["api-server"].process.pid)
    return {root.pid, *(p.pid for p in root.children(recursive=True))}


def _importers(imports: Path) -> set[int]:
    return {int(line.split()[0]) for line in imports.read_text().splitlines() if line.strip()}


def test_the_calendar_previews_and_actions_never_import_the_dag_file_in_the_api_server(site: dict[str, Any]) -> None:
    airflow, store, scoped = site["airflow"], site["store"], site["scoped"]
    admin = airflow.client
    store.create_dirty_result(
        JobResult(
            job_id="probe.20130102.2013-01-03",
            status=JobStatus.SUCCEEDED,
            attempt=Attempt("jrs_probe", "submit", "r", 1),
        )
    )
    store.mark_result_as_clean("probe.20130102.2013-01-03")
    store.create_dirty_result(
        JobResult(
            job_id="jrs_other.submit.2013-01-02",
            status=JobStatus.SUCCEEDED,
            attempt=Attempt("jrs_other", "submit", "r", 1),
        )
    )
    admin.request("POST", "/api/v2/dags/jrs_probe/dagRuns", {"logical_date": "2013-01-03T00:00:00Z"})  # a real run
    assert _importers(site["imports"]), "the dag-processor never imported the probe: the test would prove nothing"

    calendar = scoped.request("GET", "/jrs/api/dags/jrs_probe/calendar?start=2013-01-01&end=2013-01-04")
    cells = {d["logical_date"][:10]: d["cells"]["submit"] for d in calendar["dates"]}
    assert cells["2013-01-02"]["state"] == "committed" and cells["2013-01-02"]["job_id"] == "probe.20130102.2013-01-03"
    assert cells["2013-01-01"] == {"state": "missing", "job_id": "probe.20130101.2013-01-02"}
    assert [d["run_ids"] != [] for d in calendar["dates"]] == [False, False, True, False]
    assert calendar["legend"]["time_zone"] == "UTC"
    body = {"start": "2013-01-01", "end": "2013-01-04", "dry_run": True}
    preview = scoped.request("POST", "/jrs/api/dags/jrs_probe/backfill-missing", body)
    assert sorted(j["job_id"] for j in preview["jobs"]) == [
        "probe.20130101.2013-01-02", "probe.20130103.2013-01-04", "probe.20130104.2013-01-05"
    ]  # fmt: skip
    recompute = scoped.request("POST", "/jrs/api/dags/jrs_probe/recompute", body)
    assert {j["job_id"] for j in recompute["jobs"]} >= {"probe.20130102.2013-01-03"}
    admin.request("POST", "/jrs/api/dags/jrs_probe/recompute", {**body, "start": "2013-01-02", "end": "2013-01-02",
                                                               "dry_run": False})  # fmt: skip
    admin.request("POST", "/jrs/api/dags/jrs_probe/backfill-missing", {**body, "dry_run": False})

    with pytest.raises(ApiError) as refused:  # the check the DAG file would have replaced still holds
        scoped.request("GET", "/jrs/api/results/jrs_other.submit.2013-01-02")
    assert refused.value.status == 403
    with pytest.raises(ApiError) as refused:
        scoped.request("POST", "/jrs/api/dags/jrs_probe/backfill-missing", {**body, "dry_run": False})
    assert refused.value.status == 403

    in_api_server = _importers(site["imports"]) & _api_server_pids(airflow)
    assert not in_api_server, f"the API server imported the DAG file: {site['imports'].read_text()}"
