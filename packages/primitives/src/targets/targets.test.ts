import { describe, expect, it } from "vitest";
import { DEFAULT_TARGET, TARGETS, target } from "./targets.js";

describe("targets", () => {
  it("names each target by its key and keeps Hopper and Blackwell apart", () => {
    for (const [k, t] of Object.entries(TARGETS)) expect(t.name).toBe(k);
    expect(TARGETS.h100.arch).toBe("sm_90a");
    expect(TARGETS.b200.arch).toBe("sm_100a");
    expect(TARGETS.h200.smCount).toBe(132);
  });

  it("looks up model-style names and refuses unknown ones", () => {
    expect(target("H200_SXM")).toBe(TARGETS.h200);
    expect(target("b200")).toBe(TARGETS.b200);
    expect(() => target("mi300")).toThrow(/unknown target "mi300"/);
  });

  it("defaults to the H200", () => {
    expect(DEFAULT_TARGET.name).toBe("h200");
  });
});
