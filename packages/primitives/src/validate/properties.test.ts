import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { channelArb, primitiveArb } from "../../test/arbitraries.js";
import { primitiveProgram } from "../build/channel.js";
import { PrimitiveProgram, type BlockChannel } from "../model/channel.js";
import { Primitive } from "../model/primitive.js";
import { PRIMITIVES } from "../semantics/table.js";
import type { PrimitiveIssueCode } from "./issues.js";
import { validatePrimitive, validateProgram } from "./validate.js";

const caseArb = channelArb.chain((channel) => fc.tuple(fc.constant(channel), primitiveArb(channel)));

describe("built values", () => {
  it("validate against their channel and round-trip through JSON and the schema unchanged", () => {
    fc.assert(
      fc.property(caseArb, ([channel, p]) => {
        expect(validatePrimitive(p, channel)).toEqual({ ok: true, value: p });
        expect(Primitive.parse(JSON.parse(JSON.stringify(p)))).toStrictEqual(p);
      }),
      { numRuns: 300 },
    );
  });

  it("form programs that validate and round-trip", () => {
    const programArb = channelArb.chain((channel) => fc.tuple(fc.constant(channel), fc.array(primitiveArb(channel), { maxLength: 6 })));
    fc.assert(
      fc.property(programArb, ([channel, ps]) => {
        const program = primitiveProgram(channel, ps);
        expect(validateProgram(JSON.parse(JSON.stringify(program)))).toEqual({ ok: true, value: program });
        expect(PrimitiveProgram.parse(JSON.parse(JSON.stringify(program)))).toStrictEqual(program);
      }),
      { numRuns: 100 },
    );
  });
});

type Json = Record<string, unknown>;
interface Mutation {
  code: PrimitiveIssueCode;
  applies: (p: Primitive) => boolean;
  apply: (p: Json, channel: BlockChannel, k: number) => Json;
}

const role = (p: Primitive) => PRIMITIVES[p.primitive].role;
const side = (p: Primitive) => PRIMITIVES[p.primitive].side;

// Each mutation introduces exactly one known contradiction.
const mutations: Mutation[] = [
  { code: "wrong-side", applies: () => true, apply: (p) => ({ ...p, side: p.side === "host" ? "device" : "host" }) },
  { code: "acquire-on-notify", applies: (p) => role(p) === "notify", apply: (p) => ({ ...p, order: "acquire" }) },
  { code: "release-on-wait", applies: (p) => role(p) === "wait", apply: (p) => ({ ...p, order: "release" }) },
  { code: "relaxed-signal", applies: (p) => role(p) !== "data", apply: (p) => ({ ...p, order: "relaxed" }) },
  { code: "ordered-data", applies: (p) => role(p) === "data", apply: (p, _c, k) => ({ ...p, order: k % 2 ? "acquire" : "release" }) },
  {
    code: "rank-with-broadcast",
    applies: (p) => "mode" in p,
    apply: (p) => ({ ...p, mode: "broadcast", rank: { kind: "absolute", rank: 0 } }),
  },
  {
    code: "p2p-without-rank",
    applies: (p) => "mode" in p && PRIMITIVES[p.primitive].rank === "required",
    apply: ({ rank: _drop, ...p }) => ({ ...p, mode: "p2p" }),
  },
  {
    code: "rank-outside-world",
    applies: (p) => p.primitive === "peer_tile_wait" || p.primitive === "rank_wait" || p.primitive === "rank_copy_data",
    apply: (p, c, k) => {
      const rank = { kind: "absolute", rank: c.worldSize + (k % 5) };
      return p.primitive === "rank_copy_data" ? { ...p, src: { ...(p.src as Json), rank } } : { ...p, rank };
    },
  },
  { code: "host-on-sm", applies: (p) => side(p) === "host", apply: (p) => ({ ...p, resource: { unit: "sm" } }) },
  { code: "tma-on-host", applies: (p) => side(p) === "host", apply: (p) => ({ ...p, resource: { unit: "tma" } }) },
  { code: "device-on-copy-engine", applies: (p) => side(p) === "device", apply: (p) => ({ ...p, resource: { unit: "copy-engine" } }) },
  {
    code: "tma-on-signal",
    applies: (p) => side(p) === "device" && role(p) !== "data",
    apply: (p) => ({ ...p, resource: { unit: "tma" } }),
  },
  {
    code: "narrow-scope-across-ranks",
    applies: (p) => PRIMITIVES[p.primitive].crossRank,
    apply: (p, _c, k) => ({ ...p, scope: k % 2 ? "cta" : "gpu" }),
  },
  {
    code: "unknown-slot",
    applies: (p) => "slot" in p,
    apply: (p, c, k) => ({ ...p, slot: Math.max(...c.slots.map((s) => s.index)) + 1 + (k % 7) }),
  },
  {
    code: "add-exceeds-arrivals",
    applies: (p) => "add" in p,
    apply: (p, c, k) => ({ ...p, add: (c.slots.find((s) => s.index === p.slot)?.arrivals ?? 1) + 1 + (k % 3) }),
  },
  { code: "add-below-one", applies: (p) => "add" in p, apply: (p, _c, k) => ({ ...p, add: -(k % 3) }) },
];

describe("mutated values", () => {
  it("are rejected with the code of the contradiction introduced", () => {
    const arb = caseArb.chain(([channel, p]) => {
      const usable = mutations.filter((m) => m.applies(p));
      return fc.tuple(fc.constant(channel), fc.constant(p), fc.constantFrom(...usable), fc.nat({ max: 100 }));
    });
    const seen = new Set<PrimitiveIssueCode>();
    fc.assert(
      fc.property(arb, ([channel, p, m, k]) => {
        const result = validatePrimitive(m.apply(p as unknown as Json, channel, k), channel);
        expect(result.ok).toBe(false);
        if (!result.ok) expect(result.issues.map((i) => i.code)).toContain(m.code);
        seen.add(m.code);
      }),
      { numRuns: 500 },
    );
    // Every mutation was exercised at least once.
    expect([...seen].sort()).toEqual(mutations.map((m) => m.code).sort());
  });
});
