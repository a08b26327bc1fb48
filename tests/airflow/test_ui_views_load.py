"""Each view of the Job results UI loads in a real Airflow UI and shows its data, on every Airflow
minor, at the server's root and under an ``[api] base_url`` sub-path, in light and dark.

The smoke of the browser test: it runs in this tier on Airflow 3.3 and in ``scripts/older_airflow``
on 3.1 and 3.2, which load a react app's ``bundle_url`` differently (3.3 resolves it against the
page's ``<base href>``, 3.1 and 3.2 import it as given: a relative one was a bare module specifier
there, and every view showed Airflow's 404 page). What each action does is
``tests/e2e/test_ui_browser.py``'s, on the default minor. One test per site (an api-server and a
dag-processor, :func:`jrs_testbench.ui_site.ui_site`), so any xdist distribution starts each once.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from jrs_testbench.browser import Tab, chromium, luminance, missing_browser
from jrs_testbench.ui_site import DAG, UiSite, job_id, run_id, ui_site

pytestmark = pytest.mark.airflow

NAV = "/plugin/job-results"


def expect_job_results(page: Any, site: UiSite) -> Any:
    from playwright.sync_api import expect

    row = page.get_by_test_id("results").locator(f'tr[data-job-id="{job_id("tiny2", "2013-06-02")}"]')
    expect(row.locator("[data-state=dirty]")).to_have_text("dirty")
    return page.get_by_test_id("jrs-job-results")


def expect_job_detail(page: Any, site: UiSite) -> Any:
    from playwright.sync_api import expect

    detail = page.get_by_test_id("job-detail")
    expect(detail).to_have_attribute("data-job-id", job_id("tiny", "2013-06-04"))
    expect(detail.locator("[data-section=Metrics]")).to_contain_text("2,048")
    return detail


def expect_task_instance_tab(page: Any, site: UiSite) -> Any:
    from playwright.sync_api import expect

    view = page.get_by_test_id("jrs-task-instance")
    expect(view.get_by_test_id("job-detail")).to_have_attribute("data-job-id", job_id("tiny", "2013-06-01"))
    expect(view.locator("[data-mark]")).to_have_attribute("data-mark", "computed")
    return view


def expect_calendar(page: Any, site: UiSite) -> Any:
    from playwright.sync_api import expect

    # the weeks it opens on: a cell per job and date, each in one of its states (which one, and
    # choosing a range, are the e2e test's to check)
    cell = page.get_by_test_id("calendar").locator('[data-cell][data-task="tiny.submit"]').first
    expect(cell).to_have_attribute("data-cell", re.compile(r"^[a-z]+$"))
    return page.get_by_test_id("jrs-calendar")


def expect_dashboard_widget(page: Any, site: UiSite) -> Any:
    from playwright.sync_api import expect

    widget = page.get_by_test_id("jrs-dashboard")
    expect(widget.locator('[data-figure="Dirty"]')).to_contain_text(str(len(site.store.get_dirty_entries())))
    # the Spark time figures (ui_site: 06-01's tiny2 reused a result that ran 67 s)
    expect(widget.locator('[data-figure="Spark time avoided"]')).to_contain_text("1 min 07 s")
    return widget


#: path below the site's URL -> what the view must show there (returns the view's element)
VIEWS = {
    NAV: expect_job_results,
    f"{NAV}?job={job_id('tiny', '2013-06-04')}": expect_job_detail,
    f"/dags/{DAG}/runs/{run_id('2013-06-01')}/tasks/tiny.submit/plugin/job-result": expect_task_instance_tab,
    f"/dags/{DAG}/plugin/job-calendar": expect_calendar,
    "/": expect_dashboard_widget,
}


def take_theme(page: Any, view: Any, scheme: str) -> None:
    """Switch the browser's preference to ``scheme`` and wait until ``view`` follows the host's
    theme: text light on dark, dark on light (Airflow's UI follows the preference as it changes,
    so one load of a view serves both modes)."""
    page.emulate_media(color_scheme=scheme)
    color = ""
    for _ in range(100):
        color = view.evaluate("el => getComputedStyle(el).color")
        if (luminance(color) > 0.6) == (scheme == "dark"):
            return
        page.wait_for_timeout(100)
    raise AssertionError(f"the view's text stayed {color} in {scheme} mode")


@pytest.mark.parametrize("base_path", ["", "/airflow"], ids=["at-root", "under-sub-path"])
def test_each_view_loads_and_shows_its_data_in_light_and_dark(tmp_path: Path, base_path: str):
    from playwright.sync_api import expect

    if why := missing_browser():
        pytest.skip(why)
    with ui_site(tmp_path, base_path=base_path) as site, chromium() as browser:
        tab = Tab(browser, site, "light")
        try:
            for path, shows_its_data in VIEWS.items():
                page = tab.open(path)
                try:
                    view = shows_its_data(page, site)
                except AssertionError as exc:  # say which view, and what the tab saw go wrong
                    raise AssertionError(f"{path} failed; errors in the tab: {tab.errors}") from exc
                expect(view).to_be_visible()
                expect(page.get_by_test_id("error")).to_have_count(0)
                expect(page.locator("pre:visible")).to_have_count(0)  # no raw JSON unless asked for
                for scheme in ("light", "dark", "light"):
                    take_theme(page, view, scheme)
            # the menu entry's icon for each mode, served under the same base path
            for scheme in ("light", "dark"):
                page = tab.open("/")
                page.emulate_media(color_scheme=scheme)
                page.get_by_role("button", name="Browse").click()
                icon = page.get_by_role("menuitem", name="Job results").locator("img")
                expect(icon).to_have_attribute("src", f"{base_path}/jrs/static/ui/icon-{scheme}.svg")
                assert icon.evaluate("img => img.decode().then(() => img.naturalWidth, () => 0)") > 0
            assert tab.errors == []
        finally:
            tab.close()
