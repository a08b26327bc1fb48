import { describe, expect, it } from "vitest";

import type { Calendar, CalendarCell, CellDetail, StatsFigures } from "../api";
import {
  CELL,
  columnLabel,
  countAll,
  countStates,
  dayOf,
  describeCell,
  describeItem,
  describeMap,
  openingRange,
  pick,
  type Selection,
  short,
  sparkTime,
} from "./calendar";

describe("CELL", () => {
  it("gives each state, in the legend's order, its word and its colour", () => {
    expect(Object.keys(CELL)).toEqual([
      "committed",
      "stale",
      "dirty",
      "failed",
      "canceled",
      "stopped",
      "running",
      "missing",
      "quarantined",
    ]);
    for (const [state, { word }] of Object.entries(CELL)) expect(word).toBe(state);
    expect(CELL.committed.bg).toBe("green.solid");
    expect(CELL.stale.bg).toBe("orange.solid");
    expect(CELL.failed.bg).toBe("red.solid");
    expect(CELL.missing.bg).toBe("transparent");
    expect(CELL.quarantined.bg).toBe("purple.solid");
  });
});

const date = (logical_date: string | null, run_key: string, cells: Record<string, CalendarCell>) => ({
  run_key,
  logical_date,
  run_ids: [],
  cells,
});

describe("counting states", () => {
  it("counts every cell of every date by its state", () => {
    const dates: Calendar["dates"] = [
      date("2026-01-05T00:00:00+00:00", "k1", {
        a: { state: "committed", job_id: "a/1" },
        b: { state: "missing", job_id: "" },
      }),
      date("2026-01-06T00:00:00+00:00", "k2", {
        a: { state: "committed", job_id: "a/2" },
        b: { state: "failed", job_id: "b/2" },
      }),
    ];
    const counts = countStates(dates);
    expect(counts).toEqual({ committed: 2, missing: 1, failed: 1 });
    expect(countAll(counts)).toBe(4);
    expect(countAll({})).toBe(0);
  });
});

describe("dates and columns", () => {
  it("keys a column by its logical date's day, else its run key", () => {
    expect(dayOf(date("2026-01-05T00:00:00+00:00", "manual__x", {}))).toBe("2026-01-05");
    expect(dayOf(date(null, "manual__x", {}))).toBe("manual__x");
  });

  it("names the month on the first column and on each month's first day", () => {
    expect(columnLabel("2026-03-15", true)).toEqual({ month: "Mar", day: 15 });
    expect(columnLabel("2026-03-16", false)).toEqual({ month: "", day: 16 });
    expect(columnLabel("2026-12-01", false)).toEqual({ month: "Dec", day: 1 });
    expect(columnLabel("2027-01-01", false)).toEqual({ month: "Jan", day: 1 });
  });

  it("opens on three weeks up to the latest run and one after it", () => {
    const now = Date.parse("2026-06-01T00:00:00Z");
    expect(openingRange("2026-01-10T00:00:00+00:00", now)).toEqual(["2025-12-20", "2026-01-17"]);
  });

  it("never opens past today", () => {
    const now = Date.parse("2026-06-03T12:00:00Z");
    expect(openingRange("2026-06-01T00:00:00Z", now)).toEqual(["2026-05-11", "2026-06-03"]);
  });

  it("opens on the three weeks up to today for a DAG without a run", () => {
    expect(openingRange(null, Date.parse("2026-06-03T12:00:00Z"))).toEqual(["2026-05-13", "2026-06-03"]);
  });
});

describe("pick", () => {
  const none: Selection = { sel: null, anchor: null };

  it("chooses a date, then the range to a second one", () => {
    const one = pick(none, "2026-01-05", false);
    expect(one).toEqual({ sel: ["2026-01-05", "2026-01-05"], anchor: "2026-01-05" });
    const range = pick(one, "2026-01-02", false);
    expect(range).toEqual({ sel: ["2026-01-02", "2026-01-05"], anchor: null });
    expect(pick(range, "2026-01-09", false)).toEqual({ sel: ["2026-01-09", "2026-01-09"], anchor: "2026-01-09" });
  });

  it("keeps the first date with a shift-click, so the range can grow either way", () => {
    const one = pick(none, "2026-01-05", false);
    const later = pick(one, "2026-01-09", true);
    expect(later).toEqual({ sel: ["2026-01-05", "2026-01-09"], anchor: "2026-01-05" });
    expect(pick(later, "2026-01-01", true)).toEqual({ sel: ["2026-01-01", "2026-01-05"], anchor: "2026-01-05" });
  });

  it("keeps one date chosen when it is clicked again, and a shift-click without a first date chooses one", () => {
    const one = pick(none, "2026-01-05", false);
    expect(pick(one, "2026-01-05", false)).toEqual(one);
    expect(pick(none, "2026-01-07", true)).toEqual({ sel: ["2026-01-07", "2026-01-07"], anchor: "2026-01-07" });
  });
});

describe("describeMap", () => {
  it("counts a mapped task's indexes by state", () => {
    const cell: CalendarCell = {
      state: "running",
      job_id: "j",
      map: { count: 3, states: { committed: 2, running: 1 } },
    };
    expect(describeMap(cell)).toBe(" (2 committed, 1 running of 3 map indexes)");
    expect(describeMap({ state: "committed", job_id: "j" })).toBe("");
  });
});

describe("short", () => {
  it.each([
    [0, ""],
    [0.4, ""],
    [0.5, "1s"],
    [45, "45s"],
    [60, "1m"],
    [1230, "21m"],
    [3600, "1h"],
    [5 * 3600 + 1200, "5h"],
    [86400, "1d"],
    [2.6 * 86400, "3d"],
  ])("%s seconds is %j", (seconds, words) => {
    expect(short(seconds)).toBe(words);
  });
});

describe("sparkTime", () => {
  const figures: StatsFigures = {
    computed: 3,
    reused: 5,
    adopted: 0,
    untimed: 0,
    spent_seconds: 1800,
    avoided_seconds: 3720,
    spent: "30m",
    avoided: "1h 2m",
  };

  it("says the time avoided and spent", () => {
    expect(sparkTime(figures)).toBe("Spark time avoided 1h 2m (5 reused), spent 30m (3 computed)");
  });

  it("adds the adopted results and the tasks without a run time", () => {
    expect(sparkTime({ ...figures, adopted: 1, untimed: 2 })).toBe(
      "Spark time avoided 1h 2m (5 reused), spent 30m (3 computed, 1 adopted); 2 without a run time",
    );
  });
});

describe("describeCell", () => {
  const legend: Calendar["legend"] = {
    time_zone: "UTC",
    mapped: "its map indexes",
    stale: "its inputs changed since",
    unknown: "its fingerprint is not known",
  };
  const detail: CellDetail = {
    status: "SUCCEEDED",
    committed_at: "2026-01-05T03:04:05.123456+00:00",
    written_at: "2026-01-05T03:04:00+00:00",
    attempt: "etl.load in run scheduled__2026-01-05 (try 1)",
    fence: 7,
    outputs: { sales: "s3://bucket/sales/2026-01-05", totals: "s3://bucket/totals" },
    run_seconds: 12.5,
  };

  it("lists a stored result's facts under the cell's state", () => {
    expect(describeCell({ state: "committed", job_id: "j" }, detail, legend)).toBe(
      "\ncommitted 2026-01-05 03:04:05 UTC" +
        "\nby etl.load in run scheduled__2026-01-05 (try 1), fence 7" +
        "\nSpark ran 12.5 s" +
        "\nsales: s3://bucket/sales/2026-01-05" +
        "\ntotals: s3://bucket/totals",
    );
  });

  it("says when an uncommitted result was written and how it ended", () => {
    const failed = { ...detail, status: "FAILED", committed_at: null, fence: null, run_seconds: null, outputs: {} };
    expect(describeCell({ state: "failed", job_id: "j" }, failed, legend)).toBe(
      "\nwritten 2026-01-05 03:04:00 UTC (FAILED)\nby etl.load in run scheduled__2026-01-05 (try 1)",
    );
  });

  it("says why a stale cell or an unknown fingerprint may compute", () => {
    expect(describeCell({ state: "stale", job_id: "j", fingerprint: "unknown" }, undefined, legend)).toBe(
      "\nits inputs changed since\nits fingerprint is not known",
    );
    expect(describeCell({ state: "stale", job_id: "j" }, undefined, undefined)).toBe("");
  });

  it("adds nothing before the facts are asked", () => {
    expect(describeCell({ state: "committed", job_id: "j" }, undefined, legend)).toBe("");
  });
});

describe("describeItem", () => {
  it("says which job, in which run or for which date, and why", () => {
    expect(
      describeItem({ job_id: "sales/2026-01-05", run_id: "manual__1", downstream: true, why: "an input moved" }),
    ).toBe("sales/2026-01-05 in run manual__1 (downstream): an input moved");
    expect(describeItem({ job_id: "sales/2026-01-05", logical_date: "2026-01-05T00:00:00+00:00", note: "kept" })).toBe(
      "sales/2026-01-05 (2026-01-05): kept",
    );
  });

  it("says what a date needs", () => {
    const day = { logical_date: "2026-01-05T00:00:00+00:00" };
    expect(describeItem({ ...day, missing: ["a"], committed: 2, blocked: ["b", "c"], run: false })).toBe(
      "2026-01-05: 1 job to compute, 2 committed, 2 blocked (no run needed)",
    );
    expect(describeItem({ ...day, missing: [] })).toBe("2026-01-05: 0 jobs to compute");
  });

  it("keeps a sentence and writes anything else as JSON", () => {
    expect(describeItem("the backfill's runs queue behind the scheduler's")).toBe(
      "the backfill's runs queue behind the scheduler's",
    );
    expect(describeItem({ other: 1 })).toBe('{"other":1}');
    expect(describeItem(3)).toBe("3");
    expect(describeItem(null)).toBe("null");
  });
});
