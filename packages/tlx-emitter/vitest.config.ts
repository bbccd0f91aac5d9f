import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    setupFiles: ["../../tools/vitest/fast-check-seed.ts"],
    exclude: ["**/node_modules/**", "**/dist/**", "examples/**"],
    // Type tests (*.test-d.ts) of the public API run with the suite.
    typecheck: { enabled: true, include: ["src/**/*.test-d.ts"], tsconfig: "./tsconfig.json" },
  },
});
