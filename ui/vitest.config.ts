/**
 * Vitest (``npm test``; ``scripts/build_ui --check`` and ``./dev check`` run it): the unit tests
 * of the UI's logic, ``src/**\/*.test.ts(x)``, in Node (they stub the few browser globals they
 * need: ``document.baseURI``, ``localStorage``, ``fetch``); a test of a hook, which React must
 * render, asks for happy-dom in its first line. Its own config, not ``vite.config.ts``:
 * the bundle's build knows nothing of the tests, and the bundle's entries import none of them.
 */
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["src/**/*.test.{ts,tsx}"],
    environment: "node",
    // the results filter's "since" is a local date: one zone for every machine
    env: { TZ: "UTC" },
    restoreMocks: true,
    unstubGlobals: true,
  },
});
