/**
 * Builds the Job results React app as one script Airflow's UI loads (a React app plugin).
 *
 * The host imports the bundle by URL and renders the component it finds under the app's name
 * on ``globalThis``. It also puts its own React, React Router and Chakra UI on ``globalThis``:
 * using them (externals below) keeps the bundle small, and, more to the point, puts our
 * components inside the host's ChakraProvider, so they take Airflow's theme and its light or
 * dark mode with no theme code of ours. IIFE rather than UMD: the host page may carry an AMD
 * ``define`` (its editor), which a UMD wrapper would prefer over the globals.
 *
 * Two bundles: ``main.js`` for Airflow 3.2 and later, and, with ``--mode with-chakra``,
 * ``main-with-chakra.js`` for Airflow 3.1, whose UI lends no Chakra UI nor Emotion: that one
 * bundles its own (``src/main-with-chakra.tsx`` says how it keeps out of the host's way). The
 * plugin names the one its Airflow needs (``airflow_jrs/plugins/__init__.py``).
 *
 * Deterministic on purpose (``scripts/build_ui --check`` rebuilds and compares): a fixed file
 * name, no hashes, no source maps, no build time in the output.
 */
import react from "@vitejs/plugin-react";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

const here = dirname(fileURLToPath(import.meta.url));
const outDir = process.env.JRS_UI_OUT_DIR ?? resolve(here, "../airflow_jrs/plugins/static/ui");

// What the host lends on ``globalThis`` (from Airflow 3.2; 3.1 lends all but the last two).
const HOST_GLOBALS: Record<string, string> = {
  react: "React",
  "react-dom": "ReactDOM",
  "react/jsx-runtime": "ReactJSXRuntime",
  "react-router-dom": "ReactRouterDOM",
  "@chakra-ui/react": "ChakraUI",
  "@emotion/react": "EmotionReact",
};
const BRINGS_ITS_OWN = ["@chakra-ui/react", "@emotion/react"];

export default defineConfig(({ mode }) => {
  const withChakra = mode === "with-chakra";
  const globals = Object.fromEntries(
    Object.entries(HOST_GLOBALS).filter(([module]) => !(withChakra && BRINGS_ITS_OWN.includes(module))),
  );
  return {
    plugins: [react()],
    define: { "process.env.NODE_ENV": JSON.stringify("production") },
    build: {
      outDir,
      emptyOutDir: !withChakra, // the second build adds its file beside the first's
      sourcemap: false,
      minify: true,
      reportCompressedSize: false,
      lib: {
        entry: resolve(here, withChakra ? "src/main-with-chakra.tsx" : "src/main.tsx"),
        formats: ["iife"],
        name: "AirflowJrsUi",
        fileName: () => (withChakra ? "main-with-chakra.js" : "main.js"),
      },
      rolldownOptions: {
        external: Object.keys(globals),
        output: { globals },
      },
    },
  };
});
