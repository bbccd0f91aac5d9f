import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    setupFiles: ["../../tools/vitest/fast-check-seed.ts"],
    exclude: ["**/node_modules/**", "**/dist/**", "examples/**"],
    // Type tests of the published surface (*.test-d.ts import the package's built declarations by its name).
    typecheck: { enabled: true, include: ["src/**/*.test-d.ts"], tsconfig: "./tsconfig.test-d.json" },
  },
});
