// Writes schema/primitives.schema.json from the zod schemas (run by `build`); a test fails
// when the committed file differs from what this would write.
import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { primitivesJsonSchema } from "../src/model/json-schema.js";

const target = fileURLToPath(new URL("../schema/primitives.schema.json", import.meta.url));
writeFileSync(target, `${JSON.stringify(primitivesJsonSchema(), null, 2)}\n`);
console.log(`wrote ${target}`);
