import { describe, expect, it } from "vitest";
import { MappingError, type MappingErrorCode } from "./errors.js";
import { add, variable } from "./expr/expr.js";
import { simplify } from "./expr/simplify.js";
import { allGatherPull } from "./maps/collectives.js";
import { TileMappingSchema, tileChannel } from "./maps/tile-maps.js";
import { staticMap } from "./tables/table.js";

describe("MappingError", () => {
  it("is an Error with a name, a code and a message that says what to fix", () => {
    const e = new MappingError("invalid-size", "tileRows must be an integer >= 1, got 0");
    expect(e).toBeInstanceOf(Error);
    expect(e.name).toBe("MappingError");
    expect(e.code satisfies MappingErrorCode).toBe("invalid-size");
    expect(e.message).toContain(">= 1");
  });

  it("is raised by simplify for one variable name with two ranges", () => {
    const a = variable("tile", { min: 0, max: 3 });
    const b = variable("tile", { min: 0, max: 7 });
    expect(() => simplify(add(a, b))).toThrow(expect.objectContaining({ code: "inconsistent-variable" }));
  });

  it("is raised when a channel map leaves its slot range", () => {
    const m = allGatherPull({ rows: 8, cols: 2, worldSize: 2, tileRows: 2 });
    const broken = { ...m.channel, channel: staticMap(add(variable("tile", { min: 0, max: 3 }), 1)) };
    expect(() => tileChannel(broken, 3)).toThrow(expect.objectContaining({ code: "out-of-range" }));
  });
});

describe("TileMappingSchema", () => {
  it("round-trips a built mapping through JSON", () => {
    const m = allGatherPull({ rows: 100, cols: 64, worldSize: 6, tileRows: 16, tileCols: 32, channelsPerRank: 2 }, "swizzled");
    expect(TileMappingSchema.parse(JSON.parse(JSON.stringify(m)))).toEqual(m);
  });
});
