// The `ovl.manifest/v1` contract as a JSON Schema document, generated from the zod schema,
// for consumers that do not run TypeScript (the Python runner validates manifests with it).
import { z } from "zod";
import { Manifest } from "./schema.js";

/** `Manifest` as a JSON Schema object (`z.toJSONSchema`). */
export function manifestJsonSchema(): Record<string, unknown> {
  return z.toJSONSchema(Manifest) as Record<string, unknown>;
}

/** The text of `schema/manifest.schema.json`: the schema with 2-space indent and a final newline. */
export function manifestJsonSchemaText(): string {
  return `${JSON.stringify(manifestJsonSchema(), null, 2)}\n`;
}
