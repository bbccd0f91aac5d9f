import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    setupFiles: ["../../tools/vitest/fast-check-seed.ts"],
    exclude: ["**/node_modules/**", "**/dist/**", "examples/**"],
  },
});
