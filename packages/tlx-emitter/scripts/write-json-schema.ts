// Writes schema/manifest.schema.json from the zod `Manifest` schema (run by `build`), and the
// same text into the Python runner's package (`ovl_runtime/schema/`), which validates every
// manifest it loads against it; tests check that both committed files equal fresh output.
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chainJsonSchemaText } from "../src/core/chain/schema.js";
import { manifestJsonSchemaText } from "../src/core/manifest/json-schema.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const files = [
  join(root, "schema", "manifest.schema.json"),
  join(root, "..", "runtime-py", "src", "ovl_runtime", "schema", "manifest.schema.json"),
];
const text = manifestJsonSchemaText();
for (const file of files) {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, text);
  console.log(`wrote ${file}`);
}
// The chain format (`ovl.chain/v1`), the same two places.
for (const dir of [join(root, "schema"), join(root, "..", "runtime-py", "src", "ovl_runtime", "schema")]) {
  const file = join(dir, "chain.schema.json");
  writeFileSync(file, chainJsonSchemaText());
  console.log(`wrote ${file}`);
}
