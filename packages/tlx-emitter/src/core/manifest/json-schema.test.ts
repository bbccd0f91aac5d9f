import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { exampleManifests } from "../../index.js";
import { manifestJsonSchema, manifestJsonSchemaText } from "./json-schema.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const committed = join(root, "schema", "manifest.schema.json");
/** The copy the Python runner ships and validates every manifest it loads against. */
const runnerCopy = join(root, "..", "runtime-py", "src", "ovl_runtime", "schema", "manifest.schema.json");

describe("schema/manifest.schema.json", () => {
  it("equals fresh output of z.toJSONSchema(Manifest) (run `pnpm build` to refresh it)", () => {
    expect(readFileSync(committed, "utf8")).toBe(manifestJsonSchemaText());
  });

  it("is shipped unchanged in the Python runner's package (run `pnpm build` to refresh it)", () => {
    expect(readFileSync(runnerCopy, "utf8")).toBe(manifestJsonSchemaText());
  });

  it("names the fields the runner reads", () => {
    const schema = manifestJsonSchema() as { properties: Record<string, unknown>; required: string[] };
    expect(schema.required).toEqual(
      expect.arrayContaining([
        "$schema",
        "world",
        "buffers",
        "signals",
        "tables",
        "kernels",
        "hostOps",
        "reference",
        "timing",
        "waitTimeoutNs",
      ]),
    );
    // Every example manifest is a JSON document the schema's top-level keys describe.
    for (const r of Object.values(exampleManifests())) {
      for (const key of Object.keys(r.manifest)) expect(schema.properties).toHaveProperty([key]);
    }
  });
});
