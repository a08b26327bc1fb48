/**
 * The React apps of the plugin, by the ``name`` Airflow's UI looks them up under on
 * ``globalThis``: they must match ``airflow_jrs/plugins/__init__.py``
 * (``tests/airflow/test_ui_react.py`` checks both). Each bundle entry registers them.
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

/** The component the host falls back to (``globalThis.AirflowPlugin``) when a name is missing. */
export const FALLBACK = "Job results";

/** Put each app on ``globalThis`` under its name, as the host's loader expects. An ES module is
 * evaluated once per URL, so one bundle serves all four apps. */
export function register(apps: Record<string, unknown>): void {
  const host = globalThis as unknown as Record<string, unknown>;
  for (const [name, component] of Object.entries(apps)) host[name] = component;
  host.AirflowPlugin = apps[FALLBACK];
}
