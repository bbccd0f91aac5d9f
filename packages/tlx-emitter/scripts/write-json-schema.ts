// Writes schema/manifest.schema.json from the zod `Manifest` schema (run by `build`);
// a test checks that the committed file equals fresh output.
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { manifestJsonSchemaText } from "../src/manifest/json-schema.js";

const file = join(dirname(fileURLToPath(import.meta.url)), "..", "schema", "manifest.schema.json");
mkdirSync(dirname(file), { recursive: true });
writeFileSync(file, manifestJsonSchemaText());
console.log(`wrote ${file}`);
