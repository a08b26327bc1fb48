/**
 * The bundle's entry. Airflow's UI imports this script and renders, for each react app of the
 * plugin, the component it finds on ``globalThis`` under the app's ``name`` (falling back to
 * ``globalThis.AirflowPlugin``). An ES module is evaluated once per URL, so one bundle serves
 * all four apps by registering each under its name here; the names must match
 * ``airflow_jrs/plugins/__init__.py`` (``tests/airflow/test_ui_react.py`` checks both).
 *
 * The host passes ``dagId``, ``runId``, ``taskId`` and ``mapIndex`` (its route's parameters,
 * strings or undefined) to every app.
 */
import { DagCalendar } from "./views/DagCalendar";
import { DashboardWidget } from "./views/Dashboard";
import { JobResultsPage } from "./views/JobResults";
import { TaskInstanceTab } from "./views/TaskInstanceTab";

export const APPS = {
  "Job results": JobResultsPage,
  "Job result": TaskInstanceTab,
  "Job calendar": DagCalendar,
  "Job results summary": DashboardWidget,
} as const;

const host = globalThis as unknown as Record<string, unknown>;
for (const [name, component] of Object.entries(APPS)) host[name] = component;
host.AirflowPlugin = JobResultsPage;
