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
  const [loading, setLoading] = useState(false);
  const [tick, setTick] = useState(0);
  const reload = useCallback(() => setTick((t) => t + 1), []);

  useEffect(() => {
    if (key === null) return;
    const controller = new AbortController();
    setLoading(true);
    load(controller.signal)
      .then((value) => {
        setData(value);
        setError(undefined);
      })
      .catch((err: Error) => {
        if (err.name !== "AbortError") setError(err);
      })
      .finally(() => {
        if (!controller.signal.aborted) setLoading(false);
      });
    return () => controller.abort();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [key, tick]);

  return { data, error, loading, reload };
}
