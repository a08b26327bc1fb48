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
 * Deterministic on purpose (``scripts/build_ui --check`` rebuilds and compares): a fixed file
 * name, no hashes, no source maps, no build time in the output.
 */
import react from "@vitejs/plugin-react";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

const here = dirname(fileURLToPath(import.meta.url));
const outDir = process.env.JRS_UI_OUT_DIR ?? resolve(here, "../airflow_jrs/plugins/static/ui");

export default defineConfig({
  plugins: [react()],
  define: { "process.env.NODE_ENV": JSON.stringify("production") },
  build: {
    outDir,
    emptyOutDir: true,
    sourcemap: false,
    minify: true,
    reportCompressedSize: false,
    lib: {
      entry: resolve(here, "src/main.tsx"),
      formats: ["iife"],
      name: "AirflowJrsUi",
      fileName: () => "main.js",
    },
    rolldownOptions: {
      external: ["react", "react-dom", "react/jsx-runtime", "react-router-dom", "@chakra-ui/react", "@emotion/react"],
      output: {
        globals: {
          react: "React",
          "react-dom": "ReactDOM",
          "react/jsx-runtime": "ReactJSXRuntime",
          "react-router-dom": "ReactRouterDOM",
          "@chakra-ui/react": "ChakraUI",
          "@emotion/react": "EmotionReact",
        },
      },
    },
  },
});
