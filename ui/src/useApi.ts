import { useCallback, useEffect, useState } from "react";

import { ApiError } from "./api";

export interface Loaded<T> {
  data: T | undefined;
  error: ApiError | Error | undefined;
  loading: boolean;
  reload: () => void;
}

/** Load once per ``key`` (and again on ``reload``); a newer load wins over an older one. */
export function useLoad<T>(key: string | null, load: (signal: AbortSignal) => Promise<T>): Loaded<T> {
  const [data, setData] = useState<T>();
  const [error, setError] = useState<ApiError | Error>();
  const [tick, setTick] = useState(0);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  // Which load this is (the key, and how many reloads), and the last one that ended: loading is
  // the difference, so nothing sets state in the effect before its request is even sent.
  const wanted = key === null ? null : `${tick}|${key}`;
  const [ended, setEnded] = useState<string | null>(null);

  useEffect(() => {
    if (wanted === null) return;
    const controller = new AbortController();
    load(controller.signal)
      .then((value) => {
        if (controller.signal.aborted) return; // a newer load is under way: it wins
        setData(value);
        setError(undefined);
      })
      .catch((err: Error) => {
        if (!controller.signal.aborted && err.name !== "AbortError") setError(err);
      })
      .finally(() => {
        if (!controller.signal.aborted) setEnded(wanted);
      });
    return () => controller.abort();
    // ``load`` is a new closure on every render: the key names what it loads, so only a new key
    // (or a reload) loads again.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [wanted]);

  return { data, error, loading: wanted !== null && ended !== wanted, reload };
}
