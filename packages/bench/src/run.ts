// Runs benchmark suites: every `src/suites/*.bench.ts` (or those named on the command line),
// each default-exporting `() => SuiteResult | Promise<SuiteResult>`, and writes their results.
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { writeSuite, type SuiteResult } from "./harness.js";

const suitesDir = join(dirname(fileURLToPath(import.meta.url)), "suites");
const wanted = process.argv.slice(2);
const files = readdirSync(suitesDir)
  .filter((f) => f.endsWith(".bench.ts") || f.endsWith(".bench.js"))
  .filter((f) => wanted.length === 0 || wanted.some((w) => f.startsWith(w)))
  .sort();
if (files.length === 0) {
  console.error(`no benchmark suite matches ${wanted.join(", ") || "*"} in ${suitesDir}`);
  process.exit(2);
}
for (const file of files) {
  console.error(`bench: running ${file}...`);
  const mod = (await import(pathToFileURL(join(suitesDir, file)).href)) as {
    default: () => SuiteResult | Promise<SuiteResult>;
  };
  const result = await mod.default();
  process.stdout.write(`${writeSuite(result)}\n`);
}
