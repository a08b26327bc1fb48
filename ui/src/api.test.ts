import { beforeEach, describe, expect, it, vi } from "vitest";

import { act, api, ApiError, apiUrl, jobPath, resultsQuery, taskInstanceQuery } from "./api";

const BASE = "http://airflow.example/team/airflow/";

beforeEach(() => {
  vi.stubGlobal("document", { baseURI: BASE });
});

/** Stub ``fetch`` with one answer; returns the mock, to see what was asked. */
function answer(status: number, body: unknown, statusText = "") {
  const text = typeof body === "string" ? body : JSON.stringify(body);
  const fetch = vi.fn(async () => new Response(text, { status, statusText }));
  vi.stubGlobal("fetch", fetch);
  return fetch;
}

async function failure(promise: Promise<unknown>): Promise<ApiError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApiError);
  return err as ApiError;
}

describe("apiUrl", () => {
  it("resolves against the page's base, so a sub-path keeps working", () => {
    expect(apiUrl("api/results?limit=5")).toBe("http://airflow.example/team/airflow/jrs/api/results?limit=5");
    vi.stubGlobal("document", { baseURI: "https://airflow.example/" });
    expect(apiUrl("api/summary")).toBe("https://airflow.example/jrs/api/summary");
  });
});

describe("jobPath", () => {
  it("encodes each segment and keeps the slashes", () => {
    expect(jobPath("sales/daily report/2026-01-05")).toBe("sales/daily%20report/2026-01-05");
    expect(jobPath("a?b#c/%")).toBe("a%3Fb%23c/%25");
  });
});

describe("resultsQuery", () => {
  const none = { state: "", status: "", dag_id: "", job_id_prefix: "", since: "", limit: "" };

  it("sends only the filters set, since as the start of its day, and the offset", () => {
    const filters = { ...none, state: "dirty", dag_id: "etl", since: "2026-01-02", limit: "50" };
    expect(resultsQuery(filters, 100)).toBe(
      "state=dirty&dag_id=etl&since=2026-01-02T00%3A00%3A00.000Z&limit=50&offset=100",
    );
  });

  it("is the offset alone without filters", () => {
    expect(resultsQuery(none, 0)).toBe("offset=0");
  });

  it("encodes a job id prefix", () => {
    expect(resultsQuery({ ...none, job_id_prefix: "sales/a&b" }, 0)).toBe("job_id_prefix=sales%2Fa%26b&offset=0");
  });
});

describe("taskInstanceQuery", () => {
  it("names the task instance, encoded", () => {
    expect(taskInstanceQuery({ dagId: "etl", runId: "manual__2026-01-01T00:00:00+00:00", taskId: "load" })).toBe(
      "dag_id=etl&run_id=manual__2026-01-01T00%3A00%3A00%2B00%3A00&task_id=load",
    );
  });

  it("adds the map index only when the route has one", () => {
    expect(taskInstanceQuery({ dagId: "d", runId: "r", taskId: "t", mapIndex: "3" })).toBe(
      "dag_id=d&run_id=r&task_id=t&map_index=3",
    );
    expect(taskInstanceQuery({ dagId: "d", runId: "r", taskId: "t", mapIndex: "" })).toBe(
      "dag_id=d&run_id=r&task_id=t",
    );
    expect(taskInstanceQuery({})).toBe("dag_id=&run_id=&task_id=");
  });
});

describe("api", () => {
  it("GETs JSON from the plugin's API with the page's cookies", async () => {
    const fetch = answer(200, { dirty: 2 });
    await expect(api("api/summary")).resolves.toEqual({ dirty: 2 });
    expect(fetch).toHaveBeenCalledWith(`${BASE}jrs/api/summary`, {
      method: "GET",
      credentials: "same-origin",
      headers: { Accept: "application/json" },
      body: undefined,
      signal: undefined,
    });
  });

  it("POSTs a body as JSON", async () => {
    const fetch = answer(200, { done: "ok" });
    await api("api/dags/etl/recompute", { method: "POST", body: { dry_run: true } });
    expect(fetch).toHaveBeenCalledWith(
      `${BASE}jrs/api/dags/etl/recompute`,
      expect.objectContaining({
        method: "POST",
        headers: { Accept: "application/json", "Content-Type": "application/json" },
        body: '{"dry_run":true}',
      }),
    );
  });

  it("says an unknown route means an older airflow-jrs on the API server", async () => {
    answer(404, { detail: "Not Found" });
    const err = await failure(api("api/stats"));
    expect(err.status).toBe(404);
    expect(err.message).toBe(
      "this API server does not know this call: update airflow-jrs on the API server and restart it",
    );
  });

  it("gives the server's own explanation", async () => {
    answer(404, { detail: "no job sales/daily in namespace prod" });
    expect((await failure(api("api/results/sales/daily"))).message).toBe("no job sales/daily in namespace prod");
  });

  it("names each invalid parameter of a validation error", async () => {
    answer(422, {
      detail: [
        { loc: ["query", "limit"], msg: "Input should be a valid integer" },
        { loc: ["body", "range", "start"], msg: "Field required" },
        { loc: ["query"] },
      ],
    });
    const err = await failure(api("api/results?limit=x"));
    expect(err.status).toBe(422);
    expect(err.message).toBe("limit: Input should be a valid integer; range.start: Field required; : invalid");
  });

  it("says to sign in on 401 and 403 without a detail", async () => {
    answer(403, "<html>Forbidden</html>", "Forbidden");
    expect((await failure(api("api/results"))).message).toBe(
      "you are not signed in, or may not see this; sign in again or ask an admin",
    );
  });

  it("falls back to the status text, then the status", async () => {
    answer(502, "<html>Bad gateway</html>", "Bad Gateway");
    expect((await failure(api("api/results"))).message).toBe("Bad Gateway");
    answer(500, "", "");
    expect((await failure(api("api/results"))).message).toBe("HTTP 500");
  });

  it("says the server did not answer when the request fails", async () => {
    vi.stubGlobal(
      "fetch",
      vi.fn(async () => {
        throw new TypeError("Failed to fetch");
      }),
    );
    const err = await failure(api("api/results"));
    expect(err.status).toBe(0);
    expect(err.message).toBe("the API server did not answer (Failed to fetch); check that it runs and reload");
  });

  it("lets an abort through as it is", async () => {
    const abort = new DOMException("The operation was aborted.", "AbortError");
    vi.stubGlobal(
      "fetch",
      vi.fn(async () => {
        throw abort;
      }),
    );
    await expect(api("api/results")).rejects.toBe(abort);
  });
});

describe("act", () => {
  it("POSTs the action to the job's path, confirmed by its id", async () => {
    const fetch = answer(200, { job_id: "sales/daily 1", done: "forgotten" });
    await expect(act("sales/daily 1", "forget", { created_at: "2026-01-05T00:00:00Z" })).resolves.toEqual({
      job_id: "sales/daily 1",
      done: "forgotten",
    });
    expect(fetch).toHaveBeenCalledWith(
      `${BASE}jrs/api/results/sales/daily%201/forget`,
      expect.objectContaining({
        method: "POST",
        body: '{"created_at":"2026-01-05T00:00:00Z","confirm":"sales/daily 1"}',
      }),
    );
  });

  it("confirms with the job's own id, whatever the extra says", async () => {
    const fetch = answer(200, { job_id: "j", done: "stopped" });
    await act("j", "stop", { confirm: "another job" });
    expect(fetch).toHaveBeenCalledWith(
      `${BASE}jrs/api/results/j/stop`,
      expect.objectContaining({ body: '{"confirm":"j"}' }),
    );
  });
});
