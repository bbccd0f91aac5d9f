import { describe, expect, it } from "vitest";
import { Manifest } from "./schema.js";
import { EmitError } from "../writer/index.js";
import { emitManifestJson, exampleManifests } from "../../index.js";

function shuffleKeys(value: unknown, seed: { n: number }): unknown {
  if (Array.isArray(value)) return value.map((v) => shuffleKeys(v, seed));
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>);
    // A deterministic shuffle: rotate by a varying amount and reverse every other object.
    seed.n = (seed.n * 7 + 3) % 11;
    const rotated = [...entries.slice(seed.n % Math.max(1, entries.length)), ...entries.slice(0, seed.n % Math.max(1, entries.length))];
    if (seed.n % 2 === 1) rotated.reverse();
    return Object.fromEntries(rotated.map(([k, v]) => [k, shuffleKeys(v, seed)]));
  }
  return value;
}

describe("emitManifestJson", () => {
  const { ag_gemm_swizzle, gemm_rs_sm } = exampleManifests();

  it("prints the same bytes whatever the key order, $schema first, and parses back", () => {
    for (const m of [ag_gemm_swizzle!.manifest, gemm_rs_sm!.manifest]) {
      const text = emitManifestJson(m);
      expect(emitManifestJson(shuffleKeys(m, { n: 1 }) as Manifest)).toBe(text);
      expect(text.startsWith('{\n  "$schema": "ovl.manifest/v1",\n')).toBe(true);
      expect(Manifest.parse(JSON.parse(text))).toEqual(Manifest.parse(m));
    }
  });

  it("refuses a manifest that does not validate", () => {
    const bad = { ...ag_gemm_swizzle!.manifest, world: 0 };
    expect(() => emitManifestJson(bad)).toThrow(EmitError);
  });
});
