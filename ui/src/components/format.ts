/**
 * The words and links the shared components compute (``common.tsx``, ``JobDetail.tsx``): each
 * state's colour palette and word, paths into Airflow's own pages, a metric's and a run time's
 * text. Pure functions, so ``format.test.ts`` checks them without a browser.
 */
import type { Entry, LeaseHolder } from "../api";

const PALETTE: Record<string, string> = {
  clean: "green",
  committed: "green",
  SUCCEEDED: "green",
  dirty: "yellow",
  stale: "orange",
  FAILED: "red",
  failed: "red",
  quarantined: "purple",
  CANCELED: "gray",
  canceled: "gray",
  STOPPED: "gray",
  stopped: "gray",
  running: "blue",
  missing: "gray",
  reused: "teal",
  computed: "blue",
};

/** An entry's state in the words of Flink's job result store: a clean entry is committed. */
export const STATE_WORDS: Record<string, string> = {
  clean: "committed",
  dirty: "dirty",
  quarantined: "quarantined",
};

/** The Chakra colour palette of a state's badge (an entry's state or status, a calendar cell's). */
export function paletteOf(state: string): string {
  return PALETTE[state] ?? "gray";
}

/** The path of a task instance's page in Airflow's UI (a mapped one's own map index's). */
export function tiPath(a: { dag_id: string; run_id: string; task_id: string; map_index?: number }): string {
  const e = encodeURIComponent;
  let path = `/dags/${e(a.dag_id)}/runs/${e(a.run_id)}/tasks/${e(a.task_id)}`;
  if (a.map_index !== undefined && a.map_index !== null && a.map_index >= 0) path += `/mapped/${a.map_index}`;
  return path;
}

/** The path of a DAG run's page in Airflow's UI. */
export function runPath(dagId: string, runId: string): string {
  return `/dags/${encodeURIComponent(dagId)}/runs/${encodeURIComponent(runId)}`;
}

/** A metric's value as the job detail shows it: numbers grouped (``1,234,567``), strings as they are. */
export function metricText(value: unknown): string {
  if (typeof value === "number") return value.toLocaleString("en");
  if (typeof value === "string") return value;
  return JSON.stringify(value);
}

/** How long the job's Spark application ran, in whole seconds; ``null`` without both times. */
export function ranSeconds(entry: Pick<Entry, "start_time" | "end_time">): number | null {
  if (!entry.start_time || !entry.end_time) return null;
  return Math.max(0, Math.round((Date.parse(entry.end_time) - Date.parse(entry.start_time)) / 1000));
}

/** Who holds a lease, in words: ``dag.task run <run id>`` (what the owner says of itself). */
export function holderWords(owner: LeaseHolder["owner"]): string {
  return [
    owner.dag_id && owner.task_id ? `${owner.dag_id}.${owner.task_id}` : null,
    owner.run_id ? `run ${owner.run_id}` : null,
  ]
    .filter(Boolean)
    .join(" ");
}
