import { describe, expect, it } from "vitest";

import { holderWords, metricText, paletteOf, ranSeconds, runPath, STATE_WORDS, tiPath } from "./format";

describe("paletteOf", () => {
  it.each([
    ["clean", "green"],
    ["committed", "green"],
    ["SUCCEEDED", "green"],
    ["dirty", "yellow"],
    ["stale", "orange"],
    ["FAILED", "red"],
    ["failed", "red"],
    ["quarantined", "purple"],
    ["CANCELED", "gray"],
    ["STOPPED", "gray"],
    ["running", "blue"],
    ["reused", "teal"],
    ["computed", "blue"],
    ["a state from a newer server", "gray"],
  ])("%s is %s", (state, palette) => {
    expect(paletteOf(state)).toBe(palette);
  });
});

describe("STATE_WORDS", () => {
  it("calls a clean entry committed", () => {
    expect(STATE_WORDS).toEqual({ clean: "committed", dirty: "dirty", quarantined: "quarantined" });
  });
});

describe("paths into Airflow's UI", () => {
  const ti = { dag_id: "my dag", run_id: "manual__2026-01-01T00:00:00+00:00", task_id: "group.load" };

  it("encode a task instance's names", () => {
    expect(tiPath(ti)).toBe("/dags/my%20dag/runs/manual__2026-01-01T00%3A00%3A00%2B00%3A00/tasks/group.load");
  });

  it("add a mapped task instance's index, not the unmapped -1", () => {
    expect(tiPath({ ...ti, dag_id: "d", run_id: "r", map_index: 0 })).toBe("/dags/d/runs/r/tasks/group.load/mapped/0");
    expect(tiPath({ ...ti, dag_id: "d", run_id: "r", map_index: 12 })).toBe(
      "/dags/d/runs/r/tasks/group.load/mapped/12",
    );
    expect(tiPath({ ...ti, dag_id: "d", run_id: "r", map_index: -1 })).toBe("/dags/d/runs/r/tasks/group.load");
  });

  it("encode a run's names", () => {
    expect(runPath("etl/a", "backfill__2026-01-05 #1")).toBe("/dags/etl%2Fa/runs/backfill__2026-01-05%20%231");
  });
});

describe("metricText", () => {
  it.each([
    [1234567, "1,234,567"],
    [1234.5678, "1,234.568"],
    [0, "0"],
    ["12 GB", "12 GB"],
    [true, "true"],
    [null, "null"],
    [{ rows: 3 }, '{"rows":3}'],
  ])("%j is %s", (value, text) => {
    expect(metricText(value)).toBe(text);
  });
});

describe("ranSeconds", () => {
  it("is the whole seconds between start and end", () => {
    expect(ranSeconds({ start_time: "2026-01-05T00:00:00Z", end_time: "2026-01-05T00:01:30.600Z" })).toBe(91);
    expect(ranSeconds({ start_time: "2026-01-05T01:00:00+01:00", end_time: "2026-01-05T00:00:02Z" })).toBe(2);
  });

  it("is never negative, and unknown without both times", () => {
    expect(ranSeconds({ start_time: "2026-01-05T00:00:10Z", end_time: "2026-01-05T00:00:00Z" })).toBe(0);
    expect(ranSeconds({ start_time: "2026-01-05T00:00:00Z" })).toBeNull();
    expect(ranSeconds({})).toBeNull();
  });
});

describe("holderWords", () => {
  it("names the holder's task and run", () => {
    expect(holderWords({ dag_id: "etl", task_id: "load", run_id: "scheduled__2026-01-05" })).toBe(
      "etl.load run scheduled__2026-01-05",
    );
    expect(holderWords({ run_id: "r" })).toBe("run r");
    expect(holderWords({ dag_id: "etl", host: "worker-1" })).toBe("");
  });
});
