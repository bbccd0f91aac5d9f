// Writes the JSON Schema files of the package's interchange formats (`ovl.chunk-plan/v1`,
// `ovl.tile-schedule/v1`) so that non-TypeScript tools validate the same contract.
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chunkPlanJsonSchema, tileScheduleJsonSchema } from "../src/index.js";

/** The schema files, by file name, as they are written. */
export function jsonSchemaFiles(): Record<string, string> {
  return {
    "chunk-plan.schema.json": `${JSON.stringify(chunkPlanJsonSchema(), null, 2)}\n`,
    "tile-schedule.schema.json": `${JSON.stringify(tileScheduleJsonSchema(), null, 2)}\n`,
  };
}

const here = dirname(fileURLToPath(import.meta.url));
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const dir = join(here, "..", "schema");
  mkdirSync(dir, { recursive: true });
  for (const [name, text] of Object.entries(jsonSchemaFiles())) writeFileSync(join(dir, name), text);
}
