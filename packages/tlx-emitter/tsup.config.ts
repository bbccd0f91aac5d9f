import { defineConfig } from "tsup";

export default defineConfig({
  entry: ["src/index.ts"],
  format: ["esm"],
  target: "node20",
  // stripInternal: the `@internal` fields hold tree-sitter nodes, whose types (web-tree-sitter's,
  // which need Emscripten's globals) must not reach a downstream project's type check.
  dts: { compilerOptions: { stripInternal: true } },
  sourcemap: true,
  clean: true,
});
