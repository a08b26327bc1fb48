/**
 * The plugin's JSON API (mounted by Airflow at ``<base>/jrs``), as the views use it.
 *
 * URLs are resolved against the host page's ``<base href>``, never the origin's root, so the app
 * works under a base-URL sub-path and behind a proxy. The browser sends Airflow's ``_token``
 * cookie with these same-origin requests; nothing here reads or stores a token.
 */

import type { Entry, Job, LeaseHolder } from "./shapes.gen";

// A job's JSON shape is generated from airflow_jrs/views/shapes.py (scripts/ui_shapes.py).
export type { Actor, Attempt, Entry, HolderState, LeaseHolder, Recovery } from "./shapes.gen";
export type EntryState = Entry["state"];
export type JobStatus = Entry["status"];

/** A job as the page's API answers it: the views' shape, and whether this user may change it. */
export interface JobDetail extends Job {
  can_edit: boolean;
}

export interface TaskInstanceDetail extends Partial<Omit<JobDetail, "job_id">> {
  job_id: string | null;
  task: {
    dag_id: string;
    run_id: string;
    task_id: string;
    map_index: number;
    payload?: Record<string, unknown> | null;
    reused?: boolean | null;
    produced_entry?: boolean | null;
    running?: boolean;
  };
}

export interface ResultsPage {
  namespace: string;
  entries: Entry[];
  limit: number;
  offset: number;
  has_more: boolean;
  counts: { dirty: number; quarantined: number };
  can_edit_all: boolean;
}

export interface LeasesPage {
  namespace: string;
  leases: { job_id: string; lease: LeaseHolder; intent: JobDetail["intent"] }[];
}

export interface Summary {
  dirty: number;
  quarantined: number;
  leases_held: number;
  oldest_dirty: { job_id: string; since: string } | null;
}

/** Spark time spent and avoided by guarded tasks (views/stats.py Figures.json): the same figures
 * ``airflow-jrs stats`` prints. ``spent`` and ``avoided`` are the server's words for the seconds. */
export interface StatsFigures {
  computed: number;
  reused: number;
  adopted: number;
  untimed: number;
  spent_seconds: number;
  avoided_seconds: number;
  spent: string;
  avoided: string;
}

/** ``GET api/stats``: the dashboard's figures, by DAG and in total, since ``since``. */
export interface Stats {
  since: string | null;
  dag_id: string | null;
  total: StatsFigures;
  dags: (StatsFigures & { dag_id: string })[];
  notes: string[];
}

/** ``GET api/dags/{dag}/stats``: the calendar's figures, by logical date (the calendar's key). */
export interface DateStats {
  dag_id: string;
  start: string;
  end: string;
  total: StatsFigures;
  dates: Record<string, StatsFigures>;
}

export type CellState =
  "committed" | "stale" | "dirty" | "failed" | "canceled" | "stopped" | "running" | "missing" | "quarantined";

/** A stored result's facts for a calendar cell's tooltip (views/calendar.py job_detail), asked on hover. */
export interface CellDetail {
  status: string;
  committed_at: string | null;
  written_at: string | null;
  attempt: string | null;
  fence: number | null;
  outputs: Record<string, string>;
  run_seconds: number | null;
}

export interface CalendarCell {
  state: CellState;
  job_id: string;
  map?: { count: number; states: Record<string, number> };
  fingerprint?: "unknown";
}

/** One date's tooltip facts, asked on hover (``api/dags/{dag}/calendar/facts``; views/calendar.py date_facts). */
export interface DateFacts {
  logical_date: string | null;
  cells: Record<string, CellDetail>;
}

export interface Calendar {
  dag_id: string;
  jobs: { task_id: string; label: string }[];
  dates: {
    run_key: string;
    logical_date: string | null;
    run_ids: string[];
    cells: Record<string, CalendarCell>;
  }[];
  notes: string[];
  legend: { time_zone: string; mapped: string; stale: string; unknown: string };
}

export interface RangePreview {
  runs: unknown[];
  jobs: unknown[];
  how?: string;
  [key: string]: unknown;
}

/** An API error in words: the status and the server's own explanation. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = "ApiError";
  }
}

export function apiUrl(path: string): string {
  return new URL(`jrs/${path}`, document.baseURI).toString();
}

/** The job id as a path: each segment encoded, the slashes kept (the routes take ``{job_id:path}``). */
export function jobPath(jobId: string): string {
  return jobId.split("/").map(encodeURIComponent).join("/");
}

function describe(status: number, body: unknown, fallback: string): string {
  const detail = (body as { detail?: unknown } | null)?.detail;
  if (status === 404 && (detail === undefined || detail === "Not Found"))
    return "this API server does not know this call: update airflow-jrs on the API server and restart it";
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) {
    // FastAPI's validation errors: say which parameter and why
    return detail
      .map((d: { loc?: unknown[]; msg?: string }) => `${(d.loc ?? []).slice(1).join(".")}: ${d.msg ?? "invalid"}`)
      .join("; ");
  }
  if (status === 401 || status === 403)
    return "you are not signed in, or may not see this; sign in again or ask an admin";
  return fallback || `HTTP ${status}`;
}

export async function api<T>(
  path: string,
  init?: { method?: string; body?: unknown; signal?: AbortSignal },
): Promise<T> {
  let response: Response;
  try {
    response = await fetch(apiUrl(path), {
      method: init?.method ?? "GET",
      credentials: "same-origin",
      headers:
        init?.body === undefined
          ? { Accept: "application/json" }
          : { Accept: "application/json", "Content-Type": "application/json" },
      body: init?.body === undefined ? undefined : JSON.stringify(init.body),
      signal: init?.signal,
    });
  } catch (err) {
    if ((err as Error).name === "AbortError") throw err;
    throw new ApiError(0, `the API server did not answer (${(err as Error).message}); check that it runs and reload`);
  }
  let body: unknown;
  try {
    body = await response.json();
  } catch {
    body = null; // not JSON (a proxy's error page): the status speaks alone
  }
  if (!response.ok) throw new ApiError(response.status, describe(response.status, body, response.statusText));
  return body as T;
}

/** The Job results page's filters, as its form holds them (``""``: not filtered). ``since`` is a
 * date (``YYYY-MM-DD``), the start of that day in the browser's zone. */
export interface ResultsFilters {
  state: string;
  status: string;
  dag_id: string;
  job_id_prefix: string;
  since: string;
  limit: string;
}

/** The query of ``GET api/results``: the filters set, ``since`` as an instant, and the page's offset. */
export function resultsQuery(filters: ResultsFilters, offset: number): string {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(filters)) {
    if (!v) continue;
    params.set(k, k === "since" ? new Date(`${v}T00:00:00`).toISOString() : v);
  }
  params.set("offset", String(offset));
  return params.toString();
}

/** The query of ``GET api/task-instance`` from the host's route parameters (a map index only when given). */
export function taskInstanceQuery(route: {
  dagId?: string;
  runId?: string;
  taskId?: string;
  mapIndex?: string;
}): string {
  const { dagId, runId, taskId, mapIndex } = route;
  const params = new URLSearchParams({ dag_id: dagId ?? "", run_id: runId ?? "", task_id: taskId ?? "" });
  if (mapIndex !== undefined && mapIndex !== "") params.set("map_index", mapIndex);
  return params.toString();
}

export type JobAction = "forget" | "recompute" | "mark-clean" | "release-quarantine" | "stop" | "cancel";

export function act(jobId: string, action: JobAction, extra: Record<string, unknown> = {}) {
  return api<{ job_id: string; done: string; message?: string }>(`api/results/${jobPath(jobId)}/${action}`, {
    method: "POST",
    body: { ...extra, confirm: jobId },
  });
}
