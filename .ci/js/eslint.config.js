// The page scripts' linter (.ci/run's checks): ESLint's recommended rules over agent/static, as ES modules
// in the browser, with the translation functions Django's JavaScriptCatalog defines before them.
import js from "@eslint/js";
import globals from "globals";

export default [
  js.configs.recommended,
  {
    files: ["**/*.js"],
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: "module",
      globals: {
        ...globals.browser,
        gettext: "readonly",
        ngettext: "readonly",
        pgettext: "readonly",
        interpolate: "readonly",
        get_format: "readonly",
      },
    },
    rules: {
      eqeqeq: ["error", "always", { null: "ignore" }], // `x == null`: null or undefined
      "no-var": "error",
      "prefer-const": "error",
      "no-unused-vars": ["error", { caughtErrors: "none" }],
    },
  },
];
