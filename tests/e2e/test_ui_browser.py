"""The Job results React app in a real Airflow UI, in a real browser: each action.

Chromium (:mod:`jrs_testbench.browser`) signs in through Airflow's own login page and uses the
plugin where Airflow puts it: *Browse → Job results* (the list and a job's detail), a task
instance's *Job result* tab, a DAG's *Job calendar* tab and the dashboard's widget. That each
view loads, in light and dark mode, on every Airflow minor and under a base-URL sub-path, is
``tests/airflow/test_ui_views_load.py``'s. The site is :func:`jrs_testbench.ui_site.ui_site`: an
api-server and a dag-processor on the e2e DAG bundle, a store seeded with one job of each kind,
runs for the seeded dates; every action is checked in the store (or in Airflow, through its REST
API), never only on the page.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_jrs.domain.model import EntryQuery
from airflow_jrs.store import EntryState
from airflow_jrs.store.redis.stop_requests import RedisStopRequests
from airflow_jrs.views.links import job_page_url
from jrs_testbench.browser import Tab, chromium, missing_browser
from jrs_testbench.ui_site import DAG, QUARANTINED, UiSite, job_id, run_id, ui_site

pytestmark = [pytest.mark.airflow, pytest.mark.e2e, pytest.mark.xdist_group("ui-site")]

NAV = "/plugin/job-results"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if why := missing_browser():
        pytest.skip(why)
    with chromium() as browser:
        yield browser


@pytest.fixture(scope="module")
def site(browser: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiSite]:
    with ui_site(tmp_path_factory.mktemp("ui-site")) as s:
        yield s


@pytest.fixture
def tab(browser: Any, site: UiSite) -> Iterator[Tab]:
    p = Tab(browser, site)
    try:
        yield p
        assert p.errors == []
    finally:
        p.close()


def confirm(page: Any, typed: str, button: str) -> Any:
    """The Airflow-like dialog: the confirm button waits for the typed name."""
    from playwright.sync_api import expect

    dialog = page.get_by_test_id("confirm-dialog")
    expect(dialog).to_be_visible()
    yes = dialog.locator("[data-confirm=yes]")
    expect(yes).to_have_text(button)
    expect(yes).to_be_disabled()
    dialog.get_by_test_id("confirm-input").fill(typed[:-1])
    expect(yes).to_be_disabled()
    dialog.get_by_test_id("confirm-input").fill(typed)
    expect(yes).to_be_enabled()
    yes.click()
    return dialog


# -- Job results: the list, its filters and pages, one job --------------------------------------
def test_the_list_filters_pages_and_opens_a_job_in_words(tab: Tab, site: UiSite):
    from playwright.sync_api import expect

    # where Airflow puts it: Browse -> Job results
    page = tab.open("/")
    page.get_by_role("button", name="Browse").click()
    entry = page.get_by_role("menuitem", name="Job results")
    expect(entry.locator("img")).to_have_attribute("src", "/jrs/static/ui/icon-light.svg")
    loaded = "img => img.decode().then(() => img.naturalWidth, () => 0)"  # served, behind the login
    assert entry.locator("img").evaluate(loaded) > 0
    entry.click()
    page.wait_for_url(f"**{NAV}")
    results = page.get_by_test_id("results")
    row = results.locator(f'tr[data-job-id="{job_id("tiny2", "2013-06-02")}"]')
    expect(row.locator("[data-state=dirty]")).to_have_text("dirty")
    expect(row).to_contain_text("SUCCEEDED")
    expect(row).to_contain_text(re.compile(r"(minute|second)s? ago"))  # relative times

    # a page of 10 of the 21 entries, then the next
    page.get_by_label("Per page").select_option("10")
    page.get_by_role("button", name="Apply").click()
    expect(page.get_by_test_id("page")).to_have_text("1\u201310")
    page.locator("[data-page=next]").click()
    expect(page.get_by_test_id("page")).to_have_text("11\u201320")
    page.locator("[data-page=next]").click()
    expect(page.get_by_test_id("page")).to_have_text("21\u201321")
    expect(page.locator("[data-page=next]")).to_be_disabled()

    # filters: dirty only, then a job id prefix with no match
    page.get_by_label("Per page").select_option("50")
    page.get_by_label("State").select_option("dirty")
    page.get_by_role("button", name="Apply").click()
    dirty = [e for e in site.store.find_entries(EntryQuery(), limit=100) if e.state is EntryState.DIRTY]
    expect(results.locator("tbody tr")).to_have_count(len(dirty))
    expect(results.locator("tbody tr [data-state=clean]")).to_have_count(0)
    page.get_by_label("Job id starts with").fill("no_such_job")
    page.get_by_role("button", name="Apply").click()
    expect(page.locator("[data-empty=results]")).to_have_text("No entries match these filters.")

    # the leases held now, in words
    expect(page.get_by_test_id("leases")).to_contain_text(job_id("tiny", "2013-06-05"))
    expect(page.get_by_test_id("leases")).to_contain_text("tiny.submit on worker-1")

    # one job: facts, outputs with copy buttons, metrics, who/when/why history, links
    page.get_by_role("button", name="Reset").click()
    results.get_by_role("button", name=job_id("tiny", "2013-06-04"), exact=True).click()
    detail = page.get_by_test_id("job-detail")
    expect(detail).to_have_attribute("data-job-id", job_id("tiny", "2013-06-04"))
    expect(page).to_have_url(re.compile(r"\?job=jrs_e2e_triggerer\.tiny\.submit\.2013-06-04$"))
    expect(detail.get_by_test_id("history").locator("[data-reason=forgotten]")).to_have_count(1)
    expect(detail.locator("[data-section=Metrics]")).to_contain_text("2,048")
    # how it recovered, in words: the dead try, then what its successor did
    story = detail.get_by_test_id("recovery-story")
    expect(story).to_contain_text(f"Try 1 of {DAG}.tiny.submit")
    expect(story).to_contain_text("adopted the finished output")
    detail.locator("[data-section=Outputs]").locator('[data-copy="path of output"]').click()
    assert page.evaluate("navigator.clipboard.readText()") == "/data/out/tiny/2013-06-04"
    spark = detail.get_by_role("link", name=re.compile(r"^local-"))
    expect(spark).to_have_attribute("href", re.compile(r"^http://history\.example:18080/history/local-"))
    expect(spark).to_have_attribute("target", "_blank")
    # the raw JSON only when asked for
    expect(detail.locator("pre")).to_be_hidden()
    detail.locator('[data-raw-toggle="Raw JSON of this job"]').click()
    expect(detail.locator("pre")).to_be_visible()
    expect(detail.locator("pre")).to_contain_text('"fingerprint"')
    # the run link navigates Airflow's own UI (its router: no reload)
    detail.get_by_test_id("facts").get_by_role("link", name=run_id("2013-06-04")).first.click()
    page.wait_for_url(f"**/dags/{DAG}/runs/{run_id('2013-06-04')}")
    page.go_back()
    expect(page.get_by_test_id("job-detail")).to_be_visible()
    page.get_by_test_id("back").click()
    expect(page.get_by_test_id("results")).to_be_visible()

    # the operators' "Job result" extra link opens the job's page
    page.goto(f"{tab.site.url}/{job_page_url(job_id('tiny2', '2013-06-04'))}")
    expect(page.get_by_test_id("job-detail")).to_have_attribute("data-job-id", job_id("tiny2", "2013-06-04"))


# -- the task instance tab -----------------------------------------------------------------------
def test_the_task_instance_tab_says_computed_reused_or_running_first(tab: Tab):
    from playwright.sync_api import expect

    def mark(task: str, day: str) -> Any:
        page = tab.open(f"/dags/{DAG}/runs/{run_id(day)}/tasks/{task}.submit")
        page.get_by_role("link", name="Job result", exact=True).click()
        page.wait_for_url(f"**/tasks/{task}.submit/plugin/job-result")
        view = page.get_by_test_id("jrs-task-instance")
        expect(view.get_by_test_id("job-detail")).to_have_attribute("data-job-id", job_id(task, day))
        return view

    view = mark("tiny", "2013-06-01")
    expect(view.locator("[data-mark]")).to_have_attribute("data-mark", "computed")
    expect(view.locator("[data-mark]")).to_contain_text("Computed by this task")
    view = mark("tiny2", "2013-06-01")
    expect(view.locator("[data-mark]")).to_contain_text("Reused: this task did not run Spark")
    view = mark("tiny", "2013-06-05")  # holds the lease now
    expect(view.locator("[data-mark]")).to_have_attribute("data-mark", "running")
    # the mark comes first, then the detail
    first = view.locator("[data-mark], [data-section]").first
    expect(first).to_have_attribute("data-mark", "running")


# -- actions, each confirmed by typing the job id -------------------------------------------------
def open_job(tab: Tab, job: str) -> Any:
    from playwright.sync_api import expect

    page = tab.open(f"{NAV}?job={job}")
    detail = page.get_by_test_id("job-detail")
    expect(detail).to_have_attribute("data-job-id", job)
    return page, detail


def test_forget_asks_for_the_job_id_and_back_changes_nothing(tab: Tab, site: UiSite):
    from playwright.sync_api import expect

    job = job_id("tiny", "2013-05-20")
    page, detail = open_job(tab, job)
    detail.locator("[data-action=forget]").click()
    dialog = page.get_by_test_id("confirm-dialog")
    expect(dialog).to_contain_text(f"Forget the result of {job}?")
    dialog.locator("[data-confirm=no]").click()
    expect(dialog).to_have_count(0)
    assert site.store.get_entry(job) is not None

    detail.locator("[data-action=forget]").click()
    confirm(page, job, "Forget")
    expect(page.get_by_test_id("notice-success")).to_contain_text("Forget: forgotten")
    assert site.store.get_entry(job) is None
    moved = site.store.get_history(job)[0].moved
    assert moved is not None and moved.reason == "forgotten" and moved.actor.user == site.airflow.username
    expect(detail).to_contain_text("no result")
    expect(detail.get_by_test_id("history")).to_contain_text(f"forgotten by {site.airflow.username}")


def test_mark_clean_and_release_quarantine(tab: Tab, site: UiSite):
    from playwright.sync_api import expect

    dirty = job_id("tiny2", "2013-06-02")
    page, detail = open_job(tab, dirty)
    detail.locator("[data-action=mark-clean]").click()
    confirm(page, dirty, "Mark clean")
    expect(page.get_by_test_id("notice-success")).to_contain_text("Mark clean")
    assert site.store.get_entry(dirty).is_clean
    expect(detail.locator("[data-action=mark-clean]")).to_have_count(0)

    page, detail = open_job(tab, QUARANTINED)
    expect(page.get_by_test_id("error")).to_contain_text("cannot be read")
    detail.locator("[data-action=release-quarantine]").click()
    confirm(page, QUARANTINED, "Release quarantine")
    expect(page.get_by_test_id("notice-success")).to_contain_text("released")
    assert QUARANTINED not in site.store.get_quarantined()


def test_stop_and_cancel_a_running_job(tab: Tab, site: UiSite):
    from playwright.sync_api import expect

    running = job_id("tiny", "2013-06-05")
    page, detail = open_job(tab, running)
    expect(detail).to_contain_text("Running now: fence")
    detail.locator("[data-action=stop]").click()
    confirm(page, running, "Stop stream")
    expect(page.get_by_test_id("notice-success")).to_contain_text("Stop stream: stop")
    requests = RedisStopRequests(site.client, site.namespace)
    assert requests.get(running).kind == "stop"
    detail.locator("[data-action=cancel]").click()
    confirm(page, running, "Cancel stream")
    expect(page.get_by_test_id("notice-success")).to_contain_text("Cancel stream: cancel")
    assert requests.get(running).kind == "cancel"


def test_an_action_that_fails_says_why_in_the_dialog(tab: Tab, site: UiSite):
    """Forget a result someone else replaced since the page loaded: the API refuses, the dialog says so."""
    from playwright.sync_api import expect

    job = job_id("tiny", "2013-05-21")
    page, detail = open_job(tab, job)
    entry = site.store.get_entry(job)
    site.store.forget_result(job, expected=entry)
    site.store.create_dirty_result(entry.result)  # a newer result than the one shown
    detail.locator("[data-action=forget]").click()
    dialog = confirm(page, job, "Forget")
    expect(dialog.get_by_test_id("error")).to_contain_text("newer result than the one shown")
    assert site.store.get_entry(job) is not None


def test_recompute_one_job_forgets_it_and_clears_its_task_instance(tab: Tab, site: UiSite):
    """Airflow clears the task instance at the page's request (with the user's token): the
    answer names it, and the result is in the job's history with why."""
    from playwright.sync_api import expect

    job = job_id("tiny", "2013-06-04")
    page, detail = open_job(tab, job)
    detail.locator("[data-action=recompute]").click()
    expect(page.get_by_test_id("confirm-dialog")).to_contain_text("runs Spark again")
    confirm(page, job, "Recompute")
    expect(page.get_by_test_id("notice-success")).to_contain_text(
        f"Recompute: forgotten (kept in history) and cleared {DAG}.tiny.submit in run {run_id('2013-06-04')}"
    )
    assert site.store.get_entry(job) is None
    assert site.store.get_history(job)[0].moved.reason == "recomputed"


# -- the DAG's calendar: states by date, ranges, previews before anything is done ----------------
def test_the_calendar_shows_each_date_by_job_and_previews_a_range_before_acting(tab: Tab, site: UiSite):
    from playwright.sync_api import expect

    page = tab.open(f"/dags/{DAG}/plugin/job-calendar")
    cal = page.get_by_test_id("calendar")
    expect(cal).to_be_visible()
    page.get_by_test_id("from").fill("2013-06-01")
    page.get_by_test_id("to").fill("2013-06-07")

    def cell(task: str, day: str) -> Any:
        return cal.locator(f'[data-cell][data-task="{task}.submit"][data-date="{day}"]')

    expect(cell("tiny", "2013-06-01")).to_have_attribute("data-cell", "committed")
    expect(cell("tiny", "2013-06-03")).to_have_attribute("data-cell", "failed")
    expect(cell("tiny2", "2013-06-03")).to_have_attribute("data-cell", "missing")
    expect(cell("tiny", "2013-06-06")).to_have_attribute("data-cell", "canceled")
    expect(cell("tiny2", "2013-06-06")).to_have_attribute("data-cell", "stopped")
    expect(cell("tiny", "2013-06-07")).to_have_attribute("data-cell", "missing")
    # a hovered square's tooltip gains its result's facts, asked apart from the calendar
    square = cal.locator('td:has([data-cell][data-task="tiny.submit"][data-date="2013-06-01"])')
    expect(square).not_to_have_attribute("title", re.compile(r"committed \d{4}-"))
    square.hover()
    expect(square).to_have_attribute("title", re.compile(r"committed \d{4}-\d\d-\d\d [\d:]+ UTC\nby \S+ try \d"))
    # the Spark time of the dates, from a request beside the calendar's: 06-01's tiny2 reused a 67 s result
    expect(page.get_by_test_id("calendar-stats-row").locator('td[data-date="2013-06-01"]')).to_have_attribute(
        "data-avoided", "67"
    )
    expect(page.get_by_test_id("calendar-stats")).to_contain_text("Spark time avoided 1 min 07 s (1 reused)")

    # a range: click 06-07, then 06-07 again keeps one date; the preview names the runs and jobs
    cal.locator('th[data-date="2013-06-07"]').click()
    expect(page.get_by_test_id("selection")).to_contain_text("Chosen: 2013-06-07")
    runs_before = {r["dag_run_id"] for r in site.airflow.client.dag_runs(DAG)}
    page.locator("[data-action=backfill-missing]").click()
    dialog = page.get_by_test_id("confirm-dialog")
    preview = dialog.get_by_test_id("preview")
    expect(preview).to_contain_text("2013-06-07: 2 jobs to compute")
    expect(preview).to_contain_text(job_id("tiny2", "2013-06-07"))
    assert {r["dag_run_id"] for r in site.airflow.client.dag_runs(DAG)} == runs_before  # a preview only
    confirm(page, DAG, "Backfill missing dates")
    expect(page.get_by_test_id("notice-success")).to_contain_text("Backfill missing dates started")
    runs = site.airflow.client.dag_runs(DAG)
    assert any((r["logical_date"] or "").startswith("2013-06-07") for r in runs), runs

    # a second date makes a range; a third click starts again from one date
    cal.locator('th[data-date="2013-06-01"]').click()
    expect(page.get_by_test_id("selection")).to_contain_text("Chosen: 2013-06-01 to 2013-06-07")
    cal.locator('th[data-date="2013-06-01"]').click()
    expect(page.get_by_test_id("selection")).to_have_text("Chosen: 2013-06-01")
    # recompute only tiny of 06-01: the preview names its job and run; Back changes nothing
    cal.locator('button[data-task="tiny.submit"]').click()
    expect(page.get_by_test_id("selection")).to_contain_text("jobs tiny.submit")
    page.locator("[data-action=recompute-range]").click()
    preview = page.get_by_test_id("confirm-dialog").get_by_test_id("preview")
    expect(preview).to_contain_text(f"{job_id('tiny', '2013-06-01')} in run {run_id('2013-06-01')}")
    expect(preview).not_to_contain_text(job_id("tiny", "2013-06-02"))
    page.get_by_test_id("confirm-dialog").locator("[data-confirm=no]").click()
    assert site.store.get_entry(job_id("tiny", "2013-06-01")) is not None


# -- the dashboard widget -------------------------------------------------------------------------
def test_the_dashboard_widget_counts_what_needs_a_look(tab: Tab, site: UiSite):
    from playwright.sync_api import expect

    page = tab.open("/")
    widget = page.get_by_test_id("jrs-dashboard")
    dirty = len(site.store.get_dirty_entries())
    expect(widget.locator('[data-figure="Dirty"]')).to_contain_text(str(dirty))
    expect(widget.locator('[data-figure="Quarantined"]')).to_contain_text(str(len(site.store.get_quarantined())))
    expect(widget.locator('[data-figure="Leases held"]')).to_contain_text("1")  # 06-05's attempt
    if dirty:
        oldest = min(site.store.get_dirty_entries(), key=lambda e: e.created_at)
        expect(widget.locator('[data-figure="Oldest dirty"]')).to_contain_text(oldest.result.job_id)
    # the Spark time figures are the route's, which `airflow-jrs stats` prints (tests/airflow/test_stats_route.py)
    total = site.airflow.client.request("GET", "/jrs/api/stats")["total"]
    expect(widget.locator('[data-figure="Spark time avoided"]')).to_contain_text(total["avoided"])
    expect(widget.locator('[data-figure="Spark time spent"]')).to_contain_text(total["spent"])
    expect(widget.locator('[data-figure="Reused"]')).to_contain_text(str(total["reused"]))
    widget.get_by_role("link", name="Open").click()
    page.wait_for_url(f"**{NAV}")
    expect(page.get_by_test_id("jrs-job-results")).to_be_visible()
