import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    setupFiles: ["../../tools/vitest/fast-check-seed.ts"],
    // Worker threads sharing one module graph per worker (no per-file isolation): no test mocks
    // modules or mutates globals or the environment, and a fresh graph per file cost most of the
    // suite's CPU on a 2-core machine (tlx-emitter: 55 s of CPU with forks, 28 s so).
    pool: "threads",
    isolate: false,
    exclude: ["**/node_modules/**", "**/dist/**", "examples/**"],
    // Type tests of the published surface (*.test-d.ts import the package's built declarations by its name).
    typecheck: { enabled: true, include: ["src/**/*.test-d.ts"], tsconfig: "./tsconfig.test-d.json" },
  },
});
