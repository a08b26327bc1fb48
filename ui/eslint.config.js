/**
 * ESLint for the UI (``npm run lint``; ``scripts/build_ui --check`` and ``./dev check`` run it):
 * ESLint's and typescript-eslint's recommended rules, and React's rules of hooks (with the React
 * Compiler's checks that eslint-plugin-react-hooks recommends). Formatting is Prettier's
 * (``npm run format:check``), not ESLint's.
 */
import js from "@eslint/js";
import reactHooks from "eslint-plugin-react-hooks";
import globals from "globals";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["node_modules/"] },
  js.configs.recommended,
  tseslint.configs.recommended,
  reactHooks.configs.flat.recommended,
  {
    languageOptions: { globals: { ...globals.browser } },
    linterOptions: { reportUnusedDisableDirectives: "error" },
    rules: {
      // a warning nobody reads is noise: the gate fails on every finding
      "react-hooks/exhaustive-deps": "error",
    },
  },
  {
    files: ["*.config.{js,ts}"],
    languageOptions: { globals: { ...globals.node } },
  },
);
