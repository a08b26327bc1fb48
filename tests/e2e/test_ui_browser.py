"""The Job results page in a real browser, on the e2e deployment: what a person sees and does.

Chromium (Debian's ``/usr/bin/chromium``, driven by Playwright's sync API) logs in through
Airflow's own login page as the SimpleAuthManager admin, triggers ``jrs_e2e_triggerer`` with
the UI's Trigger dialog (logical date and run id typed into its form), and then uses the page
both ways: at ``/jrs/`` directly (authenticated by the ``_token`` cookie the login set) and
inside the UI through the *Browse → Job results* entry (the UI frames the page in a sandboxed
iframe). Runs are awaited through the REST API, not the UI. A forget, confirmed in the page's
own dialog, makes the next run of the date compute the job again (one Spark launch, a new
fence), which the store, the run's XCom and the page all show.

A screenshot of the page inside the UI is kept in ``tmp_path``; with ``JRS_UPDATE_DOC_IMAGES=1``
it is also written to ``docs/img/jrs-page.png`` (``docs/ui.md`` shows it), so an ordinary test
run leaves the work tree as it found it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.airflow, pytest.mark.e2e, pytest.mark.spark]

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parents[2]
DOC_IMAGE = ROOT / "docs" / "img" / "jrs-page.png"
DAG = "jrs_e2e_triggerer"
DAY = "2013-06-15"  # a date no other e2e test runs: its jobs are this module's own
TINY = f"{DAG}.tiny.submit.{DAY}"
TINY2 = f"{DAG}.tiny2.submit.{DAY}"
ALL_SUCCESS = dict.fromkeys(("tiny.submit", "tiny.cleanup", "tiny2.submit", "tiny2.cleanup"), "success")
TIMEOUT_MS = 60_000  # generous: two shared cores, Spark JVMs running beside the browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).is_file():
        pytest.skip(f"no Chromium at {CHROMIUM} (install Debian's chromium; browsers cannot be downloaded here)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    try:
        yield page
    finally:
        context.close()


def log_in(page: Any, url: str, username: str, password: str) -> None:
    page.goto(url + "/")
    page.wait_for_url("**/auth/login**")  # the UI sends an anonymous visitor to Airflow's login page
    page.locator("input[name=username]").fill(username)
    page.locator("input[name=password]").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(lambda u: "/auth/login" not in u)
    assert "_token" in {c["name"] for c in page.context.cookies()}


def trigger_in_ui(page: Any, url: str, run_id: str) -> None:
    """The DAG page's Trigger button; the dialog's logical date set to DAY (the DAG ends in
    2013: a run dated today would never start) and its run id typed under Advanced Options."""
    from playwright.sync_api import expect

    page.goto(f"{url}/dags/{DAG}")
    page.get_by_role("button", name="Trigger").first.click()
    dialog = page.get_by_role("dialog").filter(has_text="Trigger Dag")
    dialog.get_by_test_id("datetime-input").click()
    page.get_by_placeholder("YYYY/MM/DD").fill(DAY.replace("-", "/"))
    page.get_by_placeholder("HH:mm").fill("00:00")
    dialog.get_by_text(f"Trigger Dag - {DAG}").click()  # closes the date popover
    expect(dialog.get_by_test_id("datetime-input")).to_have_text("Jun 15, 2013 00:00")
    dialog.get_by_role("button", name="Advanced Options").click()
    dialog.locator("input[name=dagRunId]").fill(run_id)
    dialog.get_by_role("button", name="Trigger", exact=True).click()
    page.wait_for_url(f"**/dags/{DAG}/runs/{run_id}")  # the UI opens the new run


def test_a_person_finds_filters_and_forgets_a_job_result_in_the_ui(e2e, page, tmp_path: Path):
    from playwright.sync_api import expect

    url = e2e.airflow.url
    e2e.airflow.wait_for_dag(DAG)
    log_in(page, url, e2e.airflow.username, e2e.airflow.password)

    # -- a run triggered with the UI's own button computes both jobs
    before = e2e.launches()
    trigger_in_ui(page, url, "ui-first")
    run = e2e.client.dag_run(DAG, "ui-first")
    assert run["run_type"] == "manual" and run["logical_date"].startswith(DAY)
    assert e2e.run(DAG, "ui-first") == ALL_SUCCESS
    assert e2e.launches() - before == 2
    first = e2e.store.get_entry(TINY)
    assert first is not None and first.is_clean

    # -- the page itself at /jrs/: the login's cookie is all it needs
    page.goto(f"{url}/jrs/")
    expect(page).to_have_title("Job results")
    results = page.locator("#results tbody")
    row = results.locator(f'tr[data-job-id="{TINY}"]')
    expect(row.locator("[data-state]")).to_have_text("clean")
    expect(row).to_contain_text("SUCCEEDED")
    ti_link = row.get_by_role("link", name=f"{DAG} / tiny.submit")
    expect(ti_link).to_have_attribute("href", f"../dags/{DAG}/runs/ui-first/tasks/tiny.submit")
    expect(results.locator(f'tr[data-job-id="{TINY2}"]')).to_have_count(1)

    # filters narrow the list: a job id prefix (tiny2's ids do not start with "<dag>.tiny.")...
    page.get_by_label("Job id prefix").fill(f"{DAG}.tiny.")
    page.get_by_role("button", name="Apply").click()
    expect(results.locator(f'tr[data-job-id="{TINY2}"]')).to_have_count(0)
    expect(row).to_have_count(1)
    assert all(job.startswith(f"{DAG}.tiny.") for job in results.locator("tr").evaluate_all(
        "rows => rows.map((r) => r.dataset.jobId)"))  # fmt: skip
    # ... and a DAG that has no results
    page.get_by_label("DAG", exact=True).fill("no_such_dag")
    page.get_by_role("button", name="Apply").click()
    expect(page.locator("#message")).to_have_text("No entries match.")
    expect(results.locator("tr")).to_have_count(0)

    # -- inside the UI: Browse -> Job results, the page in the UI's iframe
    page.goto(url + "/")
    page.get_by_role("button", name="Browse").click()
    page.get_by_role("menuitem", name="Job results").click()
    frame = page.frame_locator("iframe")
    framed_row = frame.locator(f'tr[data-job-id="{TINY}"]')
    expect(framed_row.locator("[data-state]")).to_have_text("clean")
    framed_row.get_by_role("link", name=TINY).click()  # the job's detail below the list
    detail = frame.locator("#detail")
    expect(detail).to_contain_text(f"fence {first.result.fence}")
    # every part of the detail is an element: no stray text (an empty section once printed "null")
    assert detail.evaluate("box => [...box.childNodes].filter((n) => n.nodeType === 3).map((n) => n.data)") == []
    page.screenshot(path=str(tmp_path / "jrs-page.png"))
    assert (tmp_path / "jrs-page.png").stat().st_size < 300_000
    if os.environ.get("JRS_UPDATE_DOC_IMAGES") == "1":
        shutil.copyfile(tmp_path / "jrs-page.png", DOC_IMAGE)

    # Forget, behind the page's own confirmation dialog (the frame's sandbox would ignore
    # window.confirm): "Back" leaves the result alone, "Forget" forgets it.
    detail.get_by_role("button", name="Forget (run again)").click()
    confirm = frame.get_by_role("dialog", name="Confirm")
    expect(confirm).to_contain_text(f"Forget the result of {TINY}?")
    confirm.get_by_role("button", name="Back").click()
    expect(confirm).to_have_count(0)
    assert e2e.store.get_entry(TINY) is not None
    detail.get_by_role("button", name="Forget (run again)").click()
    confirm.get_by_role("button", name="Forget", exact=True).click()
    expect(frame.locator("#message")).to_contain_text(f"{TINY}: forgotten")
    expect(framed_row).to_have_count(0)
    expect(detail).to_contain_text("no result")
    assert e2e.store.get_entry(TINY) is None
    assert e2e.store.get_entry(TINY2) is not None  # only the confirmed job

    # the row's task instance link navigates the UI itself (not the frame) to that task
    frame.locator(f'tr[data-job-id="{TINY2}"]').get_by_role("link", name=f"{DAG} / tiny2.submit").click()
    page.wait_for_url(f"**/dags/{DAG}/runs/ui-first/tasks/tiny2.submit")

    # -- the next run of the date computes the forgotten job again, and only that one. Airflow
    # keeps one run per logical date: the UI's way to run it again is delete, then trigger.
    e2e.client.delete_dag_run(DAG, "ui-first")
    before = e2e.launches()
    trigger_in_ui(page, url, "ui-second")
    assert e2e.run(DAG, "ui-second") == ALL_SUCCESS
    assert e2e.launches() - before == 1
    assert e2e.client.xcom(DAG, "ui-second", "tiny.submit")["skipped"] is False
    assert e2e.client.xcom(DAG, "ui-second", "tiny2.submit")["skipped"] is True
    again = e2e.store.get_entry(TINY)
    assert again is not None and again.is_clean and again.result.fence != first.result.fence
    assert [h.result.fence for h in e2e.store.get_history(TINY)][:1] == [first.result.fence]

    page.goto(f"{url}/jrs/?job_id={TINY}")
    row = page.locator(f'tr[data-job-id="{TINY}"]')
    expect(row.locator("[data-state]")).to_have_text("clean")
    expect(row.get_by_role("link", name=f"{DAG} / tiny.submit")).to_have_attribute(
        "href", f"../dags/{DAG}/runs/ui-second/tasks/tiny.submit"
    )
    expect(page.locator("#detail")).to_contain_text(f"fence {again.result.fence}")
    expect(page.locator("#detail")).to_contain_text("History")


# -- Recompute: the one documented way from the UI ------------------------------------------------
RECOMPUTE_DAY = "2013-06-20"  # this test's own date
RECOMPUTE_TINY = f"{DAG}.tiny.submit.{RECOMPUTE_DAY}"


def test_a_person_recomputes_a_job_from_the_job_results_page_and_a_later_backfill_reuses_it(e2e, page):
    """Browse -> Job results -> the job -> Recompute: its result is forgotten (kept in history, with
    who did it) and its task instance cleared through Airflow's API with the user's own token; the
    run computes the job again (one Spark launch) and a later backfill of the date reuses the new
    result (no launch): nothing lingers on the run, unlike a recompute conf did."""
    from playwright.sync_api import expect

    url = e2e.airflow.url
    e2e.airflow.wait_for_dag(DAG)
    e2e.client.unpause(DAG)
    before = e2e.launches()
    run_id = e2e.client.trigger(DAG, RECOMPUTE_DAY)["dag_run_id"]
    assert e2e.run(DAG, run_id) == ALL_SUCCESS
    assert e2e.launches() - before == 2
    first = e2e.store.get_entry(RECOMPUTE_TINY)
    assert first is not None and first.is_clean

    log_in(page, url, e2e.airflow.username, e2e.airflow.password)
    page.get_by_role("button", name="Browse").click()
    page.get_by_role("menuitem", name="Job results").click()
    frame = page.frame_locator("iframe")
    frame.locator(f'tr[data-job-id="{RECOMPUTE_TINY}"]').get_by_role("link", name=RECOMPUTE_TINY).click()
    detail = frame.locator("#detail")
    expect(detail).to_contain_text(f"fence {first.result.fence}")
    before = e2e.launches()
    detail.get_by_role("button", name="Recompute").click()
    confirm = frame.get_by_role("dialog", name="Confirm")
    expect(confirm).to_contain_text(f"Recompute {RECOMPUTE_TINY} now?")
    confirm.get_by_role("button", name="Recompute", exact=True).click()
    expect(frame.locator("#message")).to_contain_text(f"{RECOMPUTE_TINY}: forgotten (kept in history) and cleared")

    assert e2e.run(DAG, run_id) == ALL_SUCCESS  # the cleared run, queued again by the clear
    assert e2e.launches() - before == 1  # tiny only: tiny2 stays committed
    again = e2e.store.get_entry(RECOMPUTE_TINY)
    assert again is not None and again.is_clean and again.result.fence != first.result.fence
    history = e2e.store.get_history(RECOMPUTE_TINY)
    assert [h.result.fence for h in history][:1] == [first.result.fence]
    moved = getattr(history[0], "moved", None)
    if moved is not None:  # who and why, once history entries carry them
        assert moved.reason == "recomputed" and moved.actor.user == e2e.airflow.username
    assert e2e.client.xcom(DAG, run_id, "tiny.submit")["skipped"] is False

    before = e2e.launches()
    backfill = e2e.airflow.backfills.run(DAG, RECOMPUTE_DAY, RECOMPUTE_DAY, "completed", via="rest")
    assert backfill.runs == {RECOMPUTE_DAY: "success"}, backfill
    assert e2e.launches() == before, "a later backfill recomputed a recomputed date"
    assert e2e.client.xcom(DAG, backfill.run_ids[RECOMPUTE_DAY], "tiny.submit")["skipped"] is True
    assert e2e.store.get_entry(RECOMPUTE_TINY).result.fence == again.result.fence


# -- The task instance's "Job result" tab, unmapped and mapped -----------------------------------
TAB_DAY = "2013-06-25"  # this test's own date
MAPPED_DAG = "jrs_e2e_mapped"
UI_TIME = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d "  # the UI's format, then the offset of the UI's zone


def open_job_result_tab(page: Any, url: str, ti_path: str) -> Any:
    """From the task instance's page, as a person does: its "Job result" tab; the page in its frame."""
    from playwright.sync_api import expect

    page.goto(f"{url}/dags/{ti_path}")
    page.get_by_role("link", name="Job result", exact=True).click()
    page.wait_for_url(f"**/dags/{ti_path}/plugin/job-result")
    frame = page.frame_locator("iframe")
    expect(frame.locator("#detail")).to_be_visible()
    return frame


def test_a_person_opens_the_job_result_tab_of_a_task_instance_mapped_and_unmapped(e2e, page):
    """The tab's link carries ``map_index={MAP_INDEX}``, which the UI fills only for mapped tasks:
    an unmapped task's tab once answered 422. Both kinds show their job; times follow the UI's
    timezone choice (localStorage "timezone"); the leases table says "none" when none is held."""
    import re

    from playwright.sync_api import expect

    url = e2e.airflow.url
    for dag_id in (DAG, MAPPED_DAG):
        e2e.airflow.wait_for_dag(dag_id)
        e2e.client.unpause(dag_id)
    run_id = e2e.client.trigger(DAG, TAB_DAY)["dag_run_id"]
    mapped_run = e2e.client.trigger(MAPPED_DAG, TAB_DAY)["dag_run_id"]
    assert e2e.run(DAG, run_id) == ALL_SUCCESS
    e2e.run(MAPPED_DAG, mapped_run)
    log_in(page, url, e2e.airflow.username, e2e.airflow.password)

    # -- unmapped: the link arrives with {MAP_INDEX} unfilled
    tiny = f"{DAG}.tiny.submit.{TAB_DAY}"
    frame = open_job_result_tab(page, url, f"{DAG}/runs/{run_id}/tasks/tiny.submit")
    src = page.locator("iframe").get_attribute("src") or ""
    assert "map_index={MAP_INDEX}" in src.replace("%7B", "{").replace("%7D", "}"), src  # unfilled, as sent
    detail = frame.locator("#detail")
    expect(detail).to_contain_text(tiny)
    expect(detail.locator('[data-reused="false"]')).to_have_text("computed by this task")
    expect(frame.locator("#message")).not_to_have_class("error")
    # times in the UI's zone, with its offset: UTC when chosen in the UI's menu, Tokyo when that is
    page.evaluate("() => window.localStorage.setItem('timezone', JSON.stringify('UTC'))")
    page.reload()
    expect(page.frame_locator("iframe").locator("#detail")).to_contain_text(re.compile(rf"created {UI_TIME}\+00:00"))
    page.evaluate("() => window.localStorage.setItem('timezone', JSON.stringify('Asia/Tokyo'))")
    page.reload()
    expect(page.frame_locator("iframe").locator("#detail")).to_contain_text(re.compile(rf"created {UI_TIME}\+09:00"))
    page.evaluate("() => window.localStorage.setItem('timezone', JSON.stringify('UTC'))")

    # -- mapped: map index 1 of two, each its own job
    frame = open_job_result_tab(page, url, f"{MAPPED_DAG}/runs/{mapped_run}/tasks/submit/mapped/1")
    assert "map_index=1" in page.locator("iframe").get_attribute("src")
    detail = frame.locator("#detail")
    expect(detail).to_contain_text(f"{MAPPED_DAG}.submit.{TAB_DAY}.map-1")
    expect(detail.locator('[data-reused="false"]')).to_have_text("computed by this task")
    assert e2e.store.get_entry(f"{MAPPED_DAG}.submit.{TAB_DAY}.map-0") is not None

    # -- nothing runs now: the leases table says so instead of showing bare headers
    page.goto(f"{url}/jrs/")
    expect(page.locator("#leases tbody")).to_contain_text("none: no attempt is computing a job now")
