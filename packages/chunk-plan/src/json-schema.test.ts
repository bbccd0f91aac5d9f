import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { jsonSchemaFiles } from "../scripts/write-json-schema.js";

describe("committed JSON Schema files", () => {
  it.each(Object.entries(jsonSchemaFiles()))("%s matches the zod schema", (name, text) => {
    const committed = readFileSync(join(__dirname, "..", "schema", name), "utf8");
    expect(committed).toBe(text);
    expect(JSON.parse(committed)).toHaveProperty("type", "object");
  });
});
