import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { PRIMITIVE_NAMES } from "../semantics/table.js";
import { primitivesJsonSchema } from "./json-schema.js";

describe("schema/primitives.schema.json", () => {
  it("is exactly what scripts/write-json-schema.ts generates (run `pnpm build` after changing a schema)", () => {
    const committed = readFileSync(new URL("../../schema/primitives.schema.json", import.meta.url), "utf8");
    expect(committed).toBe(`${JSON.stringify(primitivesJsonSchema(), null, 2)}\n`);
  });

  it("defines all nine primitives, the channel and the version tag", () => {
    const schema = primitivesJsonSchema() as {
      title: string;
      properties: { $schema: { const: string } };
      $defs: Record<string, { oneOf?: { properties: { primitive?: { const: string } } }[] }>;
    };
    expect(schema.title).toBe("ovl.primitives/v1");
    expect(schema.properties.$schema.const).toBe("ovl.primitives/v1");
    const names = (schema.$defs.Primitive?.oneOf ?? []).map((o) => o.properties.primitive?.const);
    expect(names).toEqual(PRIMITIVE_NAMES);
    expect(Object.keys(schema.$defs).sort()).toEqual([
      "BlockChannel",
      "Primitive",
      "RankRef",
      "Resource",
      "SignalSlot",
      "SlotRelation",
      "TileRef",
    ]);
  });
});
