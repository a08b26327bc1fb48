/**
 * What the Job calendar computes, apart from how it draws it (``DagCalendar.tsx``): each cell
 * state's colour and word, the dates it opens on, how clicks choose a range of dates, and the
 * tooltips' and previews' sentences. Pure functions, so ``calendar.test.ts`` checks them
 * without a browser.
 */
import type { Calendar, CalendarCell, CellDetail, CellState, StatsFigures } from "../api";
import { ymd } from "../time";

export const CELL: Record<CellState, { bg: string; word: string }> = {
  committed: { bg: "green.solid", word: "committed" },
  stale: { bg: "orange.solid", word: "stale" },
  dirty: { bg: "yellow.solid", word: "dirty" },
  failed: { bg: "red.solid", word: "failed" },
  canceled: { bg: "gray.solid", word: "canceled" },
  stopped: { bg: "gray.emphasized", word: "stopped" },
  running: { bg: "blue.solid", word: "running" },
  missing: { bg: "transparent", word: "missing" },
  quarantined: { bg: "purple.solid", word: "quarantined" },
};

export const countAll = (c: Partial<Record<CellState, number>>) => Object.values(c).reduce((a, n) => a + (n ?? 0), 0);

/** How many cells of the dates are in each state. */
export function countStates(dates: Calendar["dates"]): Partial<Record<CellState, number>> {
  const c: Partial<Record<CellState, number>> = {};
  for (const d of dates) for (const cell of Object.values(d.cells)) c[cell.state] = (c[cell.state] ?? 0) + 1;
  return c;
}

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const DAY_MS = 86400000;

/** A date's column: its logical date's day (``YYYY-MM-DD``), else its run key. */
export const dayOf = (d: Calendar["dates"][number]) => (d.logical_date ? d.logical_date.slice(0, 10) : d.run_key);

/** A column header's month (on the first column and each month's first day) and day of the month. */
export function columnLabel(day: string, first: boolean): { month: string; day: number } {
  const showMonth = first || day.endsWith("-01");
  return { month: showMonth ? (MONTHS[Number(day.slice(5, 7)) - 1] ?? "") : "", day: Number(day.slice(8, 10)) };
}

/** The dates the calendar opens on: three weeks up to the latest run and one after it (where
 * missing dates show), never past today; today's if the DAG has no run. */
export function openingRange(latest: string | null, now: number): [string, string] {
  const last = latest ? new Date(latest) : new Date(now);
  const after = new Date(Math.min(last.getTime() + 7 * DAY_MS, now));
  return [ymd(new Date(last.getTime() - 21 * DAY_MS)), ymd(after)];
}

export interface Selection {
  sel: [string, string] | null;
  anchor: string | null;
}

/** A click on a date: it chooses that date, a second click (or a shift-click) the range from the
 * first; a click after a range starts again. */
export function pick({ sel, anchor }: Selection, day: string, extend: boolean): Selection {
  const range: [string, string] | null = anchor ? (anchor <= day ? [anchor, day] : [day, anchor]) : null;
  if (extend && range) return { sel: range, anchor };
  if (range && sel && sel[0] === sel[1] && anchor !== day) return { sel: range, anchor: null };
  return { sel: [day, day], anchor: day };
}

/** A mapped task's cell: how many of its map indexes are in each state. */
export function describeMap(cell: CalendarCell): string {
  if (!cell.map) return "";
  const states = Object.entries(cell.map.states).map(([s, n]) => `${n} ${s}`);
  return ` (${states.join(", ")} of ${cell.map.count} map indexes)`;
}

/** A date's Spark time avoided in a calendar column's width: ``45s``, ``20m``, ``3h``, ``2d``. */
export function short(seconds: number): string {
  if (seconds < 0.5) return "";
  if (seconds < 60) return `${Math.round(seconds)}s`;
  if (seconds < 3600) return `${Math.round(seconds / 60)}m`;
  if (seconds < 86400) return `${Math.round(seconds / 3600)}h`;
  return `${Math.round(seconds / 86400)}d`;
}

/** The figures in words, as the dashboard and ``airflow-jrs stats`` give them. */
export function sparkTime(f: StatsFigures): string {
  const adopted = f.adopted ? `, ${f.adopted} adopted` : "";
  const untimed = f.untimed ? `; ${f.untimed} without a run time` : "";
  return `Spark time avoided ${f.avoided} (${f.reused} reused), spent ${f.spent} (${f.computed} computed${adopted})${untimed}`;
}

/** A cell's tooltip beyond its state: the stored result's facts (once hovered), or why it may compute. */
export function describeCell(
  cell: CalendarCell,
  d: CellDetail | undefined,
  legend: Calendar["legend"] | undefined,
): string {
  const lines: string[] = [];
  if (d) {
    if (d.committed_at) lines.push(`committed ${d.committed_at.replace("T", " ").slice(0, 19)} UTC`);
    else if (d.written_at) lines.push(`written ${d.written_at.replace("T", " ").slice(0, 19)} UTC (${d.status})`);
    if (d.attempt) lines.push(`by ${d.attempt}${d.fence !== null ? `, fence ${d.fence}` : ""}`);
    if (d.run_seconds !== null) lines.push(`Spark ran ${d.run_seconds} s`);
    for (const [name, path] of Object.entries(d.outputs)) lines.push(`${name}: ${path}`);
  }
  if (cell.state === "stale" && legend) lines.push(legend.stale);
  if (cell.fingerprint === "unknown" && legend) lines.push(legend.unknown);
  return lines.length ? `\n${lines.join("\n")}` : "";
}

/** One line of a preview, in words: a job (and why, or which run) or a date (and what it needs). */
export function describeItem(item: unknown): string {
  if (typeof item === "string") return item;
  if (!item || typeof item !== "object") return JSON.stringify(item);
  const o = item as Record<string, unknown>;
  if (typeof o.job_id === "string") {
    let line = o.job_id;
    if (o.run_id) line += ` in run ${String(o.run_id)}`;
    else if (typeof o.logical_date === "string") line += ` (${o.logical_date.slice(0, 10)})`;
    if (o.downstream) line += " (downstream)";
    if (o.why) line += `: ${String(o.why)}`;
    if (o.note) line += `: ${String(o.note)}`;
    return line;
  }
  if (typeof o.logical_date === "string") {
    const missing = Array.isArray(o.missing) ? o.missing.length : 0;
    const blocked = Array.isArray(o.blocked) ? o.blocked.length : 0;
    const parts = [`${missing} job${missing === 1 ? "" : "s"} to compute`];
    if (typeof o.committed === "number") parts.push(`${o.committed} committed`);
    if (blocked) parts.push(`${blocked} blocked`);
    return `${o.logical_date.slice(0, 10)}: ${parts.join(", ")}${o.run === false ? " (no run needed)" : ""}`;
  }
  return JSON.stringify(item);
}
