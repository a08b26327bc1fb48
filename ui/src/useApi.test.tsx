// @vitest-environment happy-dom
import { act, useState } from "react";
import { createRoot } from "react-dom/client";
import { afterEach, describe, expect, it, vi } from "vitest";

import { ApiError } from "./api";
import { type Loaded, useLoad } from "./useApi";

(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = true;

/** A load per call, settled by the test; each rejects with an AbortError when aborted, as fetch
 * does, unless ``ignoresAbort`` (a loader whose work cannot be cancelled). */
function loads(ignoresAbort = false) {
  const calls: { key: string; signal: AbortSignal; resolve: (v: string) => void; reject: (e: Error) => void }[] = [];
  const load = vi.fn(
    (key: string, signal: AbortSignal) =>
      new Promise<string>((resolve, reject) => {
        calls.push({ key, signal, resolve, reject });
        if (!ignoresAbort) signal.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError")));
      }),
  );
  return { calls, load };
}

let unmount: (() => void) | undefined;
afterEach(() => {
  act(() => unmount?.());
  unmount = undefined;
});

/** Render a component that uses ``useLoad`` with a key the test changes. */
function mount(first: string | null, load: (key: string, signal: AbortSignal) => Promise<string>) {
  let now: Loaded<string> | undefined;
  let setKey: (k: string | null) => void = () => undefined;
  function Probe() {
    const [key, set] = useState(first);
    setKey = set;
    now = useLoad(key, (signal) => load(key ?? "", signal));
    return null;
  }
  const root = createRoot(document.createElement("div"));
  act(() => root.render(<Probe />));
  unmount = () => root.unmount();
  return {
    get: () => now as Loaded<string>,
    key: (k: string | null) => act(() => setKey(k)),
  };
}

/** Settle a load and let React render what follows. */
async function settle(fn: () => void) {
  await act(async () => {
    fn();
    await Promise.resolve();
  });
}

describe("useLoad", () => {
  it("loads nothing without a key", () => {
    const { load } = loads();
    const view = mount(null, load);
    expect(load).not.toHaveBeenCalled();
    expect(view.get()).toMatchObject({ data: undefined, error: undefined, loading: false });
  });

  it("is loading from the first render until the load ends", async () => {
    const { calls, load } = loads();
    const view = mount("a", load);
    expect(calls.map((c) => c.key)).toEqual(["a"]);
    expect(view.get().loading).toBe(true);
    await settle(() => calls[0].resolve("A"));
    expect(view.get()).toMatchObject({ data: "A", error: undefined, loading: false });
  });

  it("loads again on reload, keeping the data meanwhile", async () => {
    const { calls, load } = loads();
    const view = mount("a", load);
    await settle(() => calls[0].resolve("A"));
    act(() => view.get().reload());
    expect(calls).toHaveLength(2);
    expect(view.get()).toMatchObject({ data: "A", loading: true });
    await settle(() => calls[1].resolve("A2"));
    expect(view.get()).toMatchObject({ data: "A2", loading: false });
  });

  it.each([
    ["aborted", false],
    ["that cannot be aborted", true],
  ])("lets the newer load win over an older one %s when the key changes", async (_, ignoresAbort) => {
    const { calls, load } = loads(ignoresAbort);
    const view = mount("a", load);
    view.key("b");
    expect(calls.map((c) => c.key)).toEqual(["a", "b"]);
    expect(calls[0].signal.aborted).toBe(true);
    await settle(() => calls[0].resolve("A, too late"));
    expect(view.get()).toMatchObject({ data: undefined, error: undefined, loading: true });
    await settle(() => calls[1].resolve("B"));
    expect(view.get()).toMatchObject({ data: "B", error: undefined, loading: false });
  });

  it("keeps the last data and says why a load failed", async () => {
    const { calls, load } = loads();
    const view = mount("a", load);
    await settle(() => calls[0].resolve("A"));
    act(() => view.get().reload());
    const refused = new ApiError(403, "you may not see this");
    await settle(() => calls[1].reject(refused));
    expect(view.get()).toMatchObject({ data: "A", error: refused, loading: false });
    act(() => view.get().reload());
    await settle(() => calls[2].resolve("A3"));
    expect(view.get()).toMatchObject({ data: "A3", error: undefined, loading: false });
  });

  it("stops loading when the key goes", async () => {
    const { calls, load } = loads();
    const view = mount("a", load);
    view.key(null);
    expect(calls[0].signal.aborted).toBe(true);
    expect(view.get().loading).toBe(false);
  });
});
