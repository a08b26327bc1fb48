import { afterEach, describe, expect, it, vi } from "vitest";

import { absolute, relative, uiTimezone, ymd } from "./time";

/** The zone Airflow's menu stores in ``localStorage`` (JSON), as the UI keeps it. */
function chooseZone(stored: string | null) {
  vi.stubGlobal("window", { localStorage: { getItem: (key: string) => (key === "timezone" ? stored : null) } });
}

afterEach(() => vi.unstubAllGlobals());

describe("uiTimezone", () => {
  it("is the zone chosen in Airflow's menu", () => {
    chooseZone('"Europe/Paris"');
    expect(uiTimezone()).toBe("Europe/Paris");
  });

  it("falls back to the browser's zone when none is chosen or it cannot be read", () => {
    chooseZone(null);
    expect(uiTimezone()).toBe("UTC"); // vitest.config.ts runs the tests in UTC
    chooseZone("{not json");
    expect(uiTimezone()).toBe("UTC");
    chooseZone('""');
    expect(uiTimezone()).toBe("UTC");
  });
});

describe("absolute", () => {
  it("writes the instant in the chosen zone with its offset", () => {
    chooseZone('"Europe/Paris"');
    expect(absolute("2026-03-01T12:34:56Z")).toBe("2026-03-01 13:34:56 +01:00");
    expect(absolute("2026-07-01T12:34:56Z")).toBe("2026-07-01 14:34:56 +02:00"); // summer time
    chooseZone('"Asia/Kolkata"');
    expect(absolute("2026-03-01T23:59:59+00:00")).toBe("2026-03-02 05:29:59 +05:30");
  });

  it("says +00:00 for UTC, whose offset Intl leaves out", () => {
    chooseZone('"UTC"');
    expect(absolute("2026-03-01T00:00:00Z")).toBe("2026-03-01 00:00:00 +00:00");
  });

  it("keeps what is not a time as it is, and nothing as nothing", () => {
    expect(absolute("soon")).toBe("soon");
    expect(absolute(null)).toBe("");
    expect(absolute(undefined)).toBe("");
    expect(absolute("")).toBe("");
  });

  it("falls back to ISO in UTC when the chosen zone is unknown", () => {
    chooseZone('"Mars/Olympus_Mons"');
    expect(absolute("2026-03-01T12:34:56Z")).toBe("2026-03-01T12:34:56.000Z");
  });
});

describe("relative", () => {
  const now = Date.parse("2026-03-01T12:00:00Z");

  it.each([
    ["2026-03-01T12:00:00Z", "now"],
    ["2026-03-01T11:59:30Z", "30 seconds ago"],
    ["2026-03-01T11:57:00Z", "3 minutes ago"],
    ["2026-03-01T10:00:00Z", "2 hours ago"],
    ["2026-03-02T12:00:00Z", "tomorrow"],
    ["2026-02-20T12:00:00Z", "last week"],
    ["2026-01-15T12:00:00Z", "last month"],
    ["2025-01-01T12:00:00Z", "last year"],
    ["2026-03-01T12:00:05Z", "in 5 seconds"],
  ])("%s is %s", (iso, words) => {
    expect(relative(iso, now)).toBe(words);
  });

  it("keeps what is not a time as it is, and nothing as nothing", () => {
    expect(relative("soon", now)).toBe("soon");
    expect(relative(null, now)).toBe("");
  });
});

describe("ymd", () => {
  it("is the date in UTC, whatever the zone", () => {
    expect(ymd(new Date("2026-12-31T23:30:00Z"))).toBe("2026-12-31");
    expect(ymd(new Date("2026-01-01T00:30:00+01:00"))).toBe("2025-12-31");
  });
});
