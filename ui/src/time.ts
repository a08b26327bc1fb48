/**
 * Times as the Airflow UI shows them: relative ("3 minutes ago") with the exact time, in the
 * zone the user chose in Airflow's menu, one hover away. The UI keeps that choice in the
 * same-origin localStorage key ``timezone`` (JSON); unset, it uses the browser's zone.
 */

export function uiTimezone(): string {
  try {
    const chosen = JSON.parse(window.localStorage.getItem("timezone") ?? "null");
    if (typeof chosen === "string" && chosen) return chosen;
  } catch {
    /* unreadable: fall back */
  }
  return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
}

export function absolute(iso: string | null | undefined): string {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  try {
    const parts: Record<string, string> = {};
    new Intl.DateTimeFormat("en-US", {
      timeZone: uiTimezone(),
      year: "numeric",
      month: "2-digit",
      day: "2-digit",
      hour: "2-digit",
      minute: "2-digit",
      second: "2-digit",
      hourCycle: "h23",
      timeZoneName: "longOffset",
    })
      .formatToParts(d)
      .forEach((p) => {
        parts[p.type] = p.value;
      });
    const offset = (parts.timeZoneName ?? "").replace("GMT", "") || "+00:00";
    return `${parts.year}-${parts.month}-${parts.day} ${parts.hour}:${parts.minute}:${parts.second} ${offset}`;
  } catch {
    return d.toISOString();
  }
}

const UNITS: [Intl.RelativeTimeFormatUnit, number][] = [
  ["year", 365 * 24 * 3600],
  ["month", 30 * 24 * 3600],
  ["week", 7 * 24 * 3600],
  ["day", 24 * 3600],
  ["hour", 3600],
  ["minute", 60],
  ["second", 1],
];

export function relative(iso: string | null | undefined, now: number = Date.now()): string {
  if (!iso) return "";
  const t = new Date(iso).getTime();
  if (Number.isNaN(t)) return iso;
  const seconds = (t - now) / 1000;
  const format = new Intl.RelativeTimeFormat("en", { numeric: "auto" });
  for (const [unit, size] of UNITS) {
    if (Math.abs(seconds) >= size || unit === "second") return format.format(Math.round(seconds / size), unit);
  }
  return "";
}

/** ``YYYY-MM-DD`` of a Date, in UTC (the calendar's dates are logical dates). */
export function ymd(d: Date): string {
  return d.toISOString().slice(0, 10);
}
