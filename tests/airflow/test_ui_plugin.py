"""The Job results plugin on a real Airflow API server: authentication, DAG permissions, filters,
actions, and that the store's password never leaves the server.

One api-server process (LocalDeployment, SimpleAuthManager with an admin, an editor and a
viewer), one private password-protected redis-server, seeded through the store's own API.
"""

from __future__ import annotations

import json
import secrets
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis

from airflow_jrs.compat import AIRFLOW_V_3_2_PLUS
from airflow_jrs.exceptions import CorruptJobResultError
from airflow_jrs.store import Attempt, JobResult, JobStatus, RedisJobResultStore
from airflow_jrs.store.intents import Intent
from airflow_jrs.store.redis.intents import RedisIntentStore
from airflow_jrs.store.redis.leases import RedisJobLease
from airflow_jrs.views.links import job_page_url, spark_app_url
from jrs_testbench.deployment import LocalDeployment
from jrs_testbench.helpers import pyspark_env
from jrs_testbench.redis_server import EmbeddedRedis

pytestmark = pytest.mark.airflow

REDIS_PASSWORD = "s3cret-" + secrets.token_hex(8)
USERS = {"admin": "admin", "editor": "user", "viewer": "viewer"}


@dataclass
class Response:
    status: int
    text: str
    headers: dict[str, str]

    def json(self) -> Any:
        return json.loads(self.text)


@dataclass
class Site:
    url: str
    store: RedisJobResultStore
    client: redis.Redis
    namespace: str
    tokens: dict[str, str] = field(default_factory=dict)
    seen: list[Response] = field(default_factory=list)  # every answer, for the password check

    def call(self, method: str, path: str, *, user: str | None = None, body: Any = None, **headers: str) -> Response:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if user is not None:
            req.add_header("Authorization", f"Bearer {self.tokens[user]}")
        for name, value in headers.items():
            req.add_header(name.replace("_", "-"), value)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                out = Response(resp.status, resp.read().decode(errors="replace"), dict(resp.headers))
        except urllib.error.HTTPError as exc:
            out = Response(exc.code, exc.read().decode(errors="replace"), dict(exc.headers))
        self.seen.append(out)
        return out


def _seed(store: RedisJobResultStore, client: redis.Redis, spec_root: Path) -> None:
    def attempt(dag: str, task: str = "submit", run: str = "scheduled__2024-01-01") -> Attempt:
        return Attempt(dag_id=dag, task_id=task, run_id=run, try_number=1)

    for day in range(1, 5):
        result = JobResult(
            job_id=f"dag_a.submit.2024-01-0{day}",
            status=JobStatus.SUCCEEDED,
            application_id=f"local-17000000{day}",
            outputs={"output": f"/data/out/{day}"},
            metrics={"rows": day * 100},
            fingerprint="fp-a",
            attempt=attempt("dag_a", run=f"scheduled__2024-01-0{day}"),
        )
        store.create_dirty_result(result)
        if day <= 2:
            store.mark_result_as_clean(result.job_id)
    store.create_dirty_result(
        JobResult(job_id="dag_b.submit.2024-01-01", status=JobStatus.FAILED, error="boom", attempt=attempt("dag_b"))
    )
    store.create_dirty_result(JobResult(job_id="orphan.2024-01-01", status=JobStatus.SUCCEEDED))
    # superseded once: history
    store.forget_result("dag_a.submit.2024-01-04")
    store.create_dirty_result(
        JobResult(job_id="dag_a.submit.2024-01-04", status=JobStatus.SUCCEEDED, attempt=attempt("dag_a"))
    )
    # a corrupt entry, quarantined on first read
    client.set(store.keys.result("dag_c.submit.2024-01-01"), b"{not json")
    with pytest.raises(CorruptJobResultError):
        store.get_entry("dag_c.submit.2024-01-01")
    # a running attempt: lease held, intent recorded
    lease = RedisJobLease(
        client, store.namespace, "dag_a.submit.2024-01-09", ttl=600,
        owner={"host": "worker-1", "pid": 4242, "dag_id": "dag_a", "task_id": "submit",
               "run_id": "scheduled__2024-01-09", "try_number": 1},
    )  # fmt: skip
    fence = lease.acquire()
    intents = RedisIntentStore(client, store.namespace, str(spec_root))
    intents.record(
        Intent(
            job_id="dag_a.submit.2024-01-09", fence=fence, spec_uri=intents.spec_uri("dag_a.submit.2024-01-09", fence),
            staging="/data/staging/fence-1", app_name="jrs-app", host="worker-1", pid=4242, started_at=1.0,
        ),
        {"application": "app.py"},
    )  # fmt: skip


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    namespace = f"ui-{uuid.uuid4().hex[:8]}"
    with EmbeddedRedis(tmp_path_factory.mktemp("ui-redis")) as server:
        admin = redis.Redis(port=server.port)
        admin.config_set("requirepass", REDIS_PASSWORD)
        admin.close()
        url = f"redis://:{REDIS_PASSWORD}@127.0.0.1:{server.port}/0"
        client = redis.Redis.from_url(url)
        store = RedisJobResultStore(client, namespace)
        _seed(store, client, tmp_path_factory.mktemp("specs"))

        home = tmp_path_factory.mktemp("ui-airflow")
        passwords = {name: f"pw-{name}-{secrets.token_hex(4)}" for name in USERS}
        (home / "passwords.json").write_text(json.dumps(passwords))
        env = {
            "AIRFLOW_CONN_JRS_DEFAULT": f"{url}?namespace={namespace}",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{n}:{r}" for n, r in USERS.items()),
            "AIRFLOW__JRS__SPARK_UI_URL": "http://history.example:18080/history/{application_id}/jobs/",
            **pyspark_env(),  # the repository on PYTHONPATH: the deployment's config names jrs_testbench
        }
        deployment = LocalDeployment(
            home, components=("api-server",), env=env, username="admin", password=passwords["admin"]
        )
        with deployment:
            s = Site(deployment.url, store, client, namespace)
            for name, password in passwords.items():
                doc = s.call("POST", "/auth/token", body={"username": name, "password": password}).json()
                s.tokens[name] = doc["access_token"]
            yield s
        client.close()


# ("/jrs" without the slash is not ours: Starlette mounts match "/jrs/...", so the UI's own
# page shell answers it, as it answers any unknown path.)
ROUTES = [
    ("GET", "/jrs/api/health"),
    ("GET", "/jrs/api/results"),
    ("GET", "/jrs/api/results?state=dirty"),
    ("GET", "/jrs/api/results/dag_a.submit.2024-01-01"),
    ("GET", "/jrs/api/leases"),
    ("GET", "/jrs/api/summary"),
    ("GET", "/jrs/static/ui/main.js"),
    ("GET", "/jrs/api/dags/dag_a/calendar?start=2024-01-01&end=2024-01-02"),
    ("GET", "/jrs/api/stats"),
    ("GET", "/jrs/api/dags/dag_a/stats?start=2024-01-01&end=2024-01-02"),
    ("POST", "/jrs/api/dags/dag_a/backfill-missing"),
    ("POST", "/jrs/api/dags/dag_a/recompute"),
    ("GET", "/jrs/api/task-instance?dag_id=dag_a&run_id=scheduled__2024-01-09&task_id=submit"),
    ("POST", "/jrs/api/results/dag_a.submit.2024-01-03/forget"),
    ("POST", "/jrs/api/results/dag_a.submit.2024-01-03/recompute"),
    ("POST", "/jrs/api/results/dag_a.submit.2024-01-03/mark-clean"),
    ("POST", "/jrs/api/results/dag_c.submit.2024-01-01/release-quarantine"),
    ("POST", "/jrs/api/results/dag_a.submit.2024-01-09/stop"),
    ("POST", "/jrs/api/results/dag_a.submit.2024-01-09/cancel"),
]


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_every_route_refuses_requests_without_a_valid_token(site: Site, method: str, path: str):
    body = {"confirm": path.rsplit("/", 2)[-2]} if method == "POST" else None
    for headers in ({}, {"Authorization": "Bearer not-a-jwt"}, {"Cookie": "_token=forged"}):
        r = site.call(method, path, body=body, **headers)
        assert r.status in (401, 403), (path, headers, r.status, r.text[:300])
        assert "dag_a.submit" not in r.text and "SUCCEEDED" not in r.text
    assert site.store.get_entry("dag_a.submit.2024-01-03") is not None  # nothing was acted on


def test_static_serves_subfolders_as_module_scripts_and_nothing_outside_the_folder(site: Site):
    # the React bundle Airflow's UI imports (plugins/__init__.py names it)
    bundle = site.call("GET", "/jrs/static/ui/main.js", user="viewer")
    assert bundle.status == 200 and bundle.headers["content-type"].startswith("text/javascript")
    assert "frame-ancestors 'self'" in bundle.headers["content-security-policy"]
    for path in ("/jrs/static/%2e%2e/api.py", "/jrs/static/ui/%2e%2e/%2e%2e/api.py", "/jrs/static/ui",
                 "/jrs/static/no-such.js", "/jrs/static/..%2fapi.py", "/jrs/static/../api.py"):  # fmt: skip
        assert site.call("GET", path, user="viewer").status == 404, path


def test_the_summary_counts_what_the_dashboard_widget_shows(site: Site):
    doc = site.call("GET", "/jrs/api/summary", user="viewer").json()
    dirty = site.store.get_dirty_entries()
    oldest = min(dirty, key=lambda e: e.created_at)  # type: ignore[arg-type,return-value]
    assert doc["dirty"] == len(dirty) and doc["quarantined"] == len(site.store.get_quarantined())
    assert doc["leases_held"] >= 1  # dag_a.submit.2024-01-09 runs
    assert doc["oldest_dirty"] == {"job_id": oldest.job_id, "since": oldest.created_at.isoformat()}  # type: ignore[union-attr]


def test_the_job_detail_links_its_runs_and_spark_and_tells_its_recoveries(site: Site):
    d = site.call("GET", "/jrs/api/results/dag_a.submit.2024-01-02", user="viewer").json()
    assert d["links"] == {
        "runs": [
            {"dag_id": "dag_a", "run_id": "scheduled__2024-01-02", "url": "dags/dag_a/runs/scheduled__2024-01-02"}
        ],
        "spark_ui": "http://history.example:18080/history/local-170000002/jobs/",
    }
    assert d["recovery_story"] == []  # nothing died (tests/unit/test_views_story.py tells a story)


def test_date_range_actions_need_a_dag_airflow_knows_and_edit_rights_to_act(site: Site):
    # this deployment parses no DAG files: the API says so, by name, for a preview as for the act
    r = site.call("GET", "/jrs/api/dags/dag_a/calendar?start=2024-01-01&end=2024-01-02", user="viewer")
    assert r.status == 404 and "Airflow knows no DAG 'dag_a'" in r.json()["detail"]
    body = {"start": "2024-01-01", "end": "2024-01-02", "dry_run": True}
    r = site.call("POST", "/jrs/api/dags/dag_a/backfill-missing", user="viewer", body=body)
    assert r.status == 404, r.text
    for action in ("backfill-missing", "recompute"):
        r = site.call("POST", f"/jrs/api/dags/dag_a/{action}", user="viewer", body={**body, "dry_run": False})
        assert r.status == 403 and "you may not edit DAG 'dag_a'" in r.json()["detail"], r.text
    r = site.call("GET", "/jrs/api/dags/dag_a/calendar?start=2024-01-31&end=2024-01-01", user="viewer")
    assert r.status == 400 and "swap them" in r.json()["detail"]
    r = site.call("GET", "/jrs/api/dags/dag_a/calendar?start=Jan&end=2024-01-01", user="viewer")
    assert r.status == 400 and "YYYY-MM-DD" in r.json()["detail"]


def test_airflow_lists_the_plugin_with_its_app_and_its_react_apps_without_import_errors(site: Site):
    # (which React apps, and the bundle's registration: tests/airflow/test_ui_react.py)
    plugins = site.call("GET", "/api/v2/plugins", user="admin").json()["plugins"]
    ours = next(p for p in plugins if p["name"] == "airflow_jrs")
    assert ours["fastapi_apps"][0]["url_prefix"] == "/jrs"
    # no [api] base_url path; Airflow 3.1 lends plugins no Chakra UI, so there the bundle brings its own
    bundle = "main.js" if AIRFLOW_V_3_2_PLUS else "main-with-chakra.js"
    assert {app["bundle_url"] for app in ours["react_apps"]} == {f"/jrs/static/ui/{bundle}"}
    assert not site.call("GET", "/api/v2/importErrors", user="admin").json().get("import_errors")


def test_results_are_listed_newest_first_with_filters_paging_and_counts(site: Site):
    def ids(query: str, user: str = "viewer") -> list[str]:
        r = site.call("GET", f"/jrs/api/results{query}", user=user)
        assert r.status == 200, r.text
        return [e["job_id"] for e in r.json()["entries"]]

    # "dirty" is what the store says awaits cleanup (whether a FAILED result does is the store's rule)
    dirty = {e.job_id for e in site.store.get_dirty_entries()}
    assert {"dag_a.submit.2024-01-03", "dag_a.submit.2024-01-04", "orphan.2024-01-01"} <= dirty
    everything = site.call("GET", "/jrs/api/results", user="viewer").json()
    assert everything["counts"] == {"dirty": len(dirty), "quarantined": 1}
    assert set(ids("")) == {
        "dag_a.submit.2024-01-01", "dag_a.submit.2024-01-02", "dag_a.submit.2024-01-03",
        "dag_a.submit.2024-01-04", "dag_b.submit.2024-01-01", "orphan.2024-01-01",
    }  # fmt: skip
    assert ids("")[0] == "dag_a.submit.2024-01-04"  # created last
    assert set(ids("?state=clean")) == {"dag_a.submit.2024-01-01", "dag_a.submit.2024-01-02"}
    dirty_listed = site.call("GET", "/jrs/api/results?state=dirty", user="viewer").json()["entries"]
    assert {e["state"] for e in dirty_listed} == {"dirty"} and dirty <= {e["job_id"] for e in dirty_listed}
    assert ids("?status=FAILED") == ["dag_b.submit.2024-01-01"]
    assert set(ids("?dag_id=dag_b")) == {"dag_b.submit.2024-01-01"}
    assert set(ids("?job_id_prefix=dag_a.submit.2024-01-0&state=clean")) == {
        "dag_a.submit.2024-01-01", "dag_a.submit.2024-01-02",
    }  # fmt: skip
    assert ids("?since=2999-01-01T00:00:00Z") == []
    first = site.call("GET", "/jrs/api/results?limit=4", user="viewer").json()
    second = site.call("GET", "/jrs/api/results?limit=4&offset=4", user="viewer").json()
    assert first["has_more"] and not second["has_more"]
    assert len(first["entries"]) == 4 and len(second["entries"]) == 2
    assert {e["job_id"] for e in first["entries"]} | {e["job_id"] for e in second["entries"]} == set(ids(""))
    assert site.call("GET", "/jrs/api/results?state=sideways", user="viewer").status == 422
    assert site.call("GET", "/jrs/api/results?since=yesterday", user="viewer").status == 400

    one = next(e for e in first["entries"] if e["job_id"] == "dag_a.submit.2024-01-04")
    assert one["attempt"]["dag_id"] == "dag_a" and one["state"] == "dirty"


def test_one_job_shows_its_entry_history_lease_intent_and_spark_link(site: Site):
    d = site.call("GET", "/jrs/api/results/dag_a.submit.2024-01-02", user="viewer").json()
    assert d["entry"]["state"] == "clean" and d["entry"]["metrics"] == {"rows": 200}
    assert d["entry"]["spark_url"] == "http://history.example:18080/history/local-170000002/jobs/"
    assert d["can_edit"] is False  # a viewer
    assert len(site.call("GET", "/jrs/api/results/dag_a.submit.2024-01-04", user="viewer").json()["history"]) == 1

    running = site.call("GET", "/jrs/api/results/dag_a.submit.2024-01-09", user="editor").json()
    assert running["entry"] is None and running["can_edit"] is True
    assert running["lease"]["owner"]["host"] == "worker-1" and running["intent"]["app_name"] == "jrs-app"
    leases = site.call("GET", "/jrs/api/leases", user="viewer").json()["leases"]
    assert [lease["job_id"] for lease in leases] == ["dag_a.submit.2024-01-09"]

    quarantined = site.call("GET", "/jrs/api/results/dag_c.submit.2024-01-01", user="admin").json()
    assert quarantined["quarantined"] and quarantined["problem"]["error"] == "JobResultQuarantinedError"

    ti = site.call(
        "GET", "/jrs/api/task-instance?dag_id=dag_a&run_id=scheduled__2024-01-09&task_id=submit", user="viewer"
    ).json()
    assert ti["job_id"] == "dag_a.submit.2024-01-09" and ti["task"]["running"] is True
    assert site.call("GET", "/jrs/api/results/no.such.job", user="viewer").json()["entry"] is None


def test_the_task_instance_tab_answers_for_unmapped_tasks_whose_link_leaves_map_index_unfilled(site: Site):
    # Airflow 3.3's UI fills {MAP_INDEX} only for mapped tasks: an unmapped task's tab asks
    # with the placeholder itself (or without it), which is map index -1, not a 422.
    base = "/jrs/api/task-instance?dag_id=dag_a&run_id=scheduled__2024-01-09&task_id=submit"
    for suffix in ("&map_index={MAP_INDEX}", "&map_index=", "", "&map_index=-1"):
        r = site.call("GET", base + suffix.replace("{", "%7B").replace("}", "%7D"), user="viewer")
        assert r.status == 200, (suffix, r.text)
        assert r.json()["job_id"] == "dag_a.submit.2024-01-09" and r.json()["task"]["map_index"] == -1
    mapped = site.call("GET", base + "&map_index=3", user="viewer").json()
    assert mapped["task"]["map_index"] == 3 and mapped["job_id"] is None  # that lease is not map index 3's
    bad = site.call("GET", base + "&map_index=three", user="viewer")
    assert bad.status == 400 and "map_index" in bad.json()["detail"]


def test_the_tab_of_a_running_mapped_task_finds_the_lease_of_its_own_map_index(site: Site):
    owner = {"host": "worker-2", "pid": 77, "dag_id": "dag_m", "task_id": "submit", "run_id": "r-m", "try_number": 1}
    leases = [
        RedisJobLease(site.client, site.namespace, f"dag_m.submit.2024-01-01.map-{i}", ttl=600, owner=owner)
        for i in (0, 1)
    ]
    for lease in leases:
        lease.acquire()
    try:
        base = "/jrs/api/task-instance?dag_id=dag_m&run_id=r-m&task_id=submit&map_index="
        for index in (1, 0):
            ti = site.call("GET", f"{base}{index}", user="viewer").json()
            assert ti["job_id"] == f"dag_m.submit.2024-01-01.map-{index}" and ti["task"]["running"] is True
    finally:
        for lease in leases:
            lease.release()


def test_a_viewer_reads_but_may_not_act(site: Site):
    job = "dag_a.submit.2024-01-03"
    for action in ("forget", "mark-clean"):
        r = site.call("POST", f"/jrs/api/results/{job}/{action}", user="viewer", body={"confirm": job})
        assert r.status == 403, r.text
    r = site.call("POST", "/jrs/api/results/dag_c.submit.2024-01-01/release-quarantine", user="viewer",
                  body={"confirm": "dag_c.submit.2024-01-01"})  # fmt: skip
    assert r.status == 403
    entry = site.store.get_entry(job)
    assert entry is not None and entry.is_dirty


def test_an_editor_forgets_marks_clean_and_releases_quarantine_with_confirmation(site: Site):
    job = "dag_a.submit.2024-01-03"
    unconfirmed = site.call("POST", f"/jrs/api/results/{job}/mark-clean", user="editor", body={"confirm": "other"})
    assert unconfirmed.status == 400 and site.store.get_entry(job).is_dirty  # type: ignore[union-attr]
    form = site.call("POST", f"/jrs/api/results/{job}/forget", user="editor", Content_Type="text/plain")
    assert form.status in (400, 422) and site.store.get_entry(job) is not None

    assert site.call("POST", f"/jrs/api/results/{job}/mark-clean", user="editor", body={"confirm": job}).status == 200
    assert site.store.get_entry(job).is_clean  # type: ignore[union-attr]

    r = site.call("POST", f"/jrs/api/results/{job}/forget", user="editor", body={"confirm": job})
    assert r.status == 200, r.text
    assert site.store.get_entry(job) is None and site.store.get_history(job)
    assert site.call("POST", f"/jrs/api/results/{job}/forget", user="editor", body={"confirm": job}).status == 404

    quarantined = "dag_c.submit.2024-01-01"
    r = site.call("POST", f"/jrs/api/results/{quarantined}/release-quarantine", user="editor",
                  body={"confirm": quarantined})  # fmt: skip
    assert r.status == 200 and "{not json" in r.json()["bytes"]
    assert quarantined not in site.store.get_quarantined()

    # a batch job whose attempt runs without a supervisor: nobody could relay the stop, so it is
    # refused with the reason (and what to do instead), nothing written
    r = site.call("POST", "/jrs/api/results/dag_a.submit.2024-01-09/stop", user="editor",
                  body={"confirm": "dag_a.submit.2024-01-09"})  # fmt: skip
    assert r.status == 400 and "no running supervisor" in r.json()["detail"]


def test_a_forget_from_the_ui_says_who_when_and_why_and_goes_to_airflows_audit_log(site: Site):
    # Who, when and why: the history item names the UI user, the time and the reason, and the
    # action is a row of Airflow's own audit log (the Log table, served by /api/v2/eventLogs).
    job = "dag_a.submit.2024-01-01"
    shown = site.call("GET", f"/jrs/api/results/{job}", user="editor").json()["entry"]
    stale = site.call("POST", f"/jrs/api/results/{job}/forget", user="editor",
                      body={"confirm": job, "created_at": "2000-01-01T00:00:00+00:00"})  # fmt: skip
    assert stale.status == 409 and "newer result" in stale.json()["detail"]
    assert site.store.get_entry(job) is not None  # not the entry the page showed: nothing forgotten
    r = site.call("POST", f"/jrs/api/results/{job}/forget", user="editor",
                  body={"confirm": job, "created_at": shown["created_at"]})  # fmt: skip
    assert r.status == 200, r.text

    history = site.call("GET", f"/jrs/api/results/{job}", user="viewer").json()["history"]
    moved = history[0]["moved"]
    assert moved["reason"] == "forgotten" and moved["by"]["via"] == "ui" and moved["by"]["user"] == "editor"
    assert moved["by"]["text"] == "editor (Airflow UI)" and moved["moved_at"]
    assert history[0]["application_id"] == shown["application_id"]

    logs = site.call("GET", "/api/v2/eventLogs?event=jrs_forget&limit=100", user="admin").json()["event_logs"]
    mine = [x for x in logs if job in (x.get("extra") or "") and x["owner"] == "editor"]
    assert mine, logs
    assert json.loads(mine[-1]["extra"])["method"] == "POST"


def test_a_recompute_from_the_ui_changes_nothing_when_it_cannot_clear_the_task_instance(site: Site):
    # The one documented way to recompute: Recompute forgets, then clears the task instance through Airflow's own
    # API with the user's token. It asks that API first: here Airflow has no DAG dag_a, so the
    # result stays and the answer says why (the happy path: tests/e2e/test_ui_browser.py).
    job = "dag_a.submit.2024-01-02"
    assert site.call("POST", f"/jrs/api/results/{job}/recompute", user="viewer", body={"confirm": job}).status == 403
    r = site.call("POST", f"/jrs/api/results/{job}/recompute", user="editor", body={"confirm": job})
    assert r.status == 502, r.text
    detail = r.json()["detail"]
    assert detail.startswith("nothing was changed") and "/api/v2/dags/dag_a" in detail and "HTTP 404" in detail
    assert site.store.get_entry(job) is not None and site.store.get_history(job) == []
    running = "dag_a.submit.2024-01-09"  # its lease is held and it has no result yet
    r = site.call("POST", f"/jrs/api/results/{running}/recompute", user="admin", body={"confirm": running})
    assert r.status == 404 and "no result" in r.json()["detail"]


def test_a_recompute_never_sends_the_users_token_to_the_host_the_request_names(site: Site):
    # A defect fixed here: the plugin built Airflow's URL from the request's Host header, so a
    # request with "Host: <another server>" sent GET /api/v2/dags/... and the clear there, with
    # the user's bearer token, and believed its answers. A real listener on that port records
    # what reaches it and answers every request "200 {}", as a willing impostor would.
    import http.server
    import threading

    seen: list[tuple[str, str, str | None]] = []

    class Impostor(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            seen.append((self.command, self.path, self.headers.get("Authorization")))
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b"{}")

        do_GET = do_POST = _answer

        def log_message(self, *args: Any) -> None:
            pass

    impostor = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Impostor)
    threading.Thread(target=impostor.serve_forever, daemon=True).start()
    try:
        job = "dag_a.submit.2024-01-02"
        forged = f"127.0.0.1:{impostor.server_address[1]}"
        r = site.call("POST", f"/jrs/api/results/{job}/recompute", user="editor", body={"confirm": job}, Host=forged)
    finally:
        impostor.shutdown()
        impostor.server_close()
    assert seen == [], f"the recompute sent requests (and the user's token) to the forged host {forged}: {seen}"
    # it asked the deployment's own API (which has no DAG dag_a): nothing was changed
    assert r.status == 502, r.text
    detail = r.json()["detail"]
    assert detail.startswith("nothing was changed") and f"{site.url}/api/v2/dags/dag_a" in detail, detail
    assert site.store.get_entry(job) is not None and site.store.get_history(job) == []


def test_the_store_password_is_in_no_answer(site: Site):
    # an answer of every kind, then all of them (this module's earlier tests included)
    for method, path in ROUTES:
        site.call(
            method, path.replace("/jrs", "/jrs", 1), user="admin", body={"confirm": "x"} if method == "POST" else None
        )
    assert len(site.seen) > 50
    for r in site.seen:
        assert REDIS_PASSWORD not in r.text and REDIS_PASSWORD not in json.dumps(r.headers)
    health = site.call("GET", "/jrs/api/health", user="viewer").json()
    assert health == {"status": "ok", "namespace": site.namespace, "ping_ms": health["ping_ms"]}


def test_link_urls_are_relative_and_never_scripts():
    assert job_page_url("dag.task/2024-01-01") == "plugin/job-results?job=dag.task%2F2024-01-01"
    assert spark_app_url("http://h:18080/history/{application_id}/", "app-1") == "http://h:18080/history/app-1/"
    assert spark_app_url("javascript:alert(1)//{application_id}", "app-1") is None
    assert spark_app_url(None, "app-1") is None and spark_app_url("http://h/{application_id}", None) is None


def test_the_api_server_stack_with_the_plugin_imports_without_a_starlette_deprecation_warning():
    # The api-server logged a StarletteDeprecationWarning at start: Airflow's execution API
    # imports svcs, whose FastAPI module imports starlette's test client, which warns when only
    # httpx (not httpx2) is installed. The environment pins httpx2: no warning, no cause.
    import subprocess
    import sys

    import starlette.exceptions

    if not hasattr(starlette.exceptions, "StarletteDeprecationWarning"):  # Airflow 3.1's starlette 0.48
        pytest.skip("this starlette has no StarletteDeprecationWarning (Airflow 3.1 pins starlette<0.49)")
    # (an error, not a record: Airflow routes warnings to its log as soon as it is imported)
    code = (
        "import warnings\n"
        "from starlette.exceptions import StarletteDeprecationWarning\n"
        "warnings.simplefilter('error', StarletteDeprecationWarning)\n"
        "from airflow_jrs.plugins.api import create_app\n"
        "create_app()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-600:]
