import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { ChunkPlan } from "../model/schema.js";
import { computeDep, localCopy, PlanBuilder, pull } from "../plan/builder.js";
import { shardRegion } from "../plan/shard.js";
import { allGatherHierarchical, allGatherRing, allReduceTilewise, reduceScatterRing } from "../templates/index.js";
import { FormatError } from "./errors.js";
import { chunkPlanJsonSchema, parsePlan, parsePlanJson, serializePlan } from "./json.js";
import { dumpPlan } from "./dump.js";
import { planToMermaid } from "./mermaid.js";

const RUNS = { numRuns: 30 };

const planArb: fc.Arbitrary<ChunkPlan> = fc
  .record({
    world: fc.integer({ min: 1, max: 4 }),
    extra: fc.integer({ min: 0, max: 5 }),
    split: fc.integer({ min: 1, max: 2 }),
    which: fc.integer({ min: 0, max: 3 }),
  })
  .map(({ world, extra, split, which }) => {
    const tensor = { name: "A", shape: [2 * world + extra, 3], dtype: "bf16" as const };
    const o = { tensor, axis: 0, mesh: [world], split };
    if (which === 0) return allGatherRing(o);
    if (which === 1) return reduceScatterRing({ ...o, afterCompute: true });
    if (which === 2) return allReduceTilewise({ tensor, mesh: [world], tile: [2, 2] });
    return allGatherHierarchical({ ...o, mesh: [1, world], schedule: "pipelined" });
  });

/** A two-rank plan touching every op kind, both dependency kinds and a label. */
function smallPlan(): ChunkPlan {
  const A = { name: "A", shape: [4, 8], dtype: "fp16" as const };
  const b = new PlanBuilder({ name: "demo", mesh: [2] });
  b.tensor(A);
  b.tensor({ name: "S", shape: [4, 8], dtype: "fp16" });
  b.claim({ collective: "all-gather", tensor: "A", axis: 0, ranks: [0, 1] });
  for (const r of [0, 1]) b.local(r, shardRegion(A, 0, 2, r));
  const first = b.add(0, 0, pull(1, shardRegion(A, 0, 2, 1), shardRegion(A, 0, 2, 1), { label: 'say "hi" <now>' }));
  b.add(1, 0, pull(0, shardRegion(A, 0, 2, 0), shardRegion(A, 0, 2, 0), { deps: [first] }));
  const s = { tensor: "S", offsets: [0, 0], sizes: [2, 8] };
  b.add(0, 0, localCopy({ tensor: "A", offsets: [2, 0], sizes: [2, 8] }, s));
  b.add(1, 1, localCopy(s, { tensor: "S", offsets: [2, 0], sizes: [2, 8] }, { reduce: "sum", deps: [computeDep(1, s)] }));
  return b.build();
}

describe("JSON", () => {
  it("serialises with a stable key order and round-trips exactly", () => {
    fc.assert(
      fc.property(planArb, (plan) => {
        const text = serializePlan(plan);
        const back = parsePlanJson(text);
        expect(back).toEqual(plan);
        expect(serializePlan(back)).toBe(text);
        expect(serializePlan(plan, { indent: 0 })).not.toContain("\n");
        // Key order does not depend on the order keys were inserted in.
        const shuffled = JSON.parse(JSON.stringify(plan), (_, v: unknown) =>
          v !== null && typeof v === "object" && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).reverse()) : v,
        ) as ChunkPlan;
        expect(serializePlan(shuffled)).toBe(text);
      }),
      RUNS,
    );
    expect(serializePlan(smallPlan(), { indent: 0 })).toMatch(
      /^\{"\$schema":"ovl\.chunk-plan\/v1","name":"demo","mesh":\{"shape":\[2\]\},"tensors":\[\{"name":"A","shape":\[4,8\],"dtype":"fp16"\}/,
    );
  });

  it("lists every schema issue with its JSON path", () => {
    const plan = JSON.parse(serializePlan(smallPlan())) as { ranks: { streams: { peer: unknown; side: unknown }[][] }[] };
    plan.ranks[0]!.streams[0]![0]!.peer = -1;
    plan.ranks[1]!.streams[0]![0]!.side = "sideways";
    try {
      parsePlan(plan);
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(FormatError);
      const err = e as FormatError;
      expect(err.code).toBe("invalid-plan");
      expect(err.issues.map((i) => i.path)).toEqual(["$.ranks[0].streams[0][0].peer", "$.ranks[1].streams[0][0].side"]);
      expect(err.message).toContain("$.ranks[0].streams[0][0].peer");
    }
    expect(() => parsePlanJson("{ nope")).toThrow(expect.objectContaining({ code: "invalid-json" }));
  });

  it("never throws anything but FormatError on random text or random JSON", () => {
    const check = (f: () => unknown): void => {
      try {
        f();
      } catch (e) {
        expect(e).toBeInstanceOf(FormatError);
      }
    };
    fc.assert(
      fc.property(fc.string(), (text) => check(() => parsePlanJson(text))),
      { numRuns: 200 },
    );
    fc.assert(
      fc.property(fc.jsonValue(), (value) => check(() => parsePlan(value))),
      { numRuns: 200 },
    );
    // Damaged real plans: one value replaced somewhere inside.
    fc.assert(
      fc.property(planArb, fc.nat(), fc.jsonValue(), (plan, at, value) => {
        const text = serializePlan(plan, { indent: 0 });
        const i = at % text.length;
        check(() => parsePlanJson(text.slice(0, i) + JSON.stringify(value) + text.slice(i + 1)));
      }),
      RUNS,
    );
  });

  it("exports the JSON Schema of the format", () => {
    const schema = chunkPlanJsonSchema();
    expect(schema).toEqual(z.toJSONSchema(ChunkPlan));
    expect(schema).toMatchObject({ type: "object", required: expect.arrayContaining(["$schema", "name", "mesh", "tensors", "ranks"]) });
    expect(JSON.stringify(chunkPlanJsonSchema("input"))).toContain("ovl.chunk-plan/v1");
  });
});

describe("text dump and Mermaid", () => {
  it("dumps a plan one line per op", () => {
    expect(dumpPlan(smallPlan())).toMatchInlineSnapshot(`
      "plan demo  mesh [2]  world 2
      tensor A fp16 [4, 8]
      tensor S fp16 [4, 8]
      claim all-gather A axis 0 over r[0, 1]
      rank 0  local A[0:2, 0:8]
      r0 s0 #0 pull  A[2:4, 0:8] <- r1  # say "hi" <now>
      r0 s0 #1 copy  S[0:2, 0:8] <- A[2:4, 0:8]
      rank 1  local A[2:4, 0:8]
      r1 s0 #0 pull  A[0:2, 0:8] <- r0  after r0.s0#0
      r1 s1 #0 copy+sum S[2:4, 0:8] <- S[0:2, 0:8]  after compute r1 S[0:2, 0:8]
      "
    `);
  });

  it("draws the dependency graph with escaped labels", () => {
    expect(planToMermaid(smallPlan())).toMatchInlineSnapshot(`
      "flowchart TB
        subgraph rank0 ["rank 0"]
          r0_s0_0["s0 #35;0 pull  A[2:4, 0:8] #60;- r1 (say #34;hi#34; #60;now#62;)"]
          r0_s0_1["s0 #35;1 copy  S[0:2, 0:8] #60;- A[2:4, 0:8]"]
        end
        subgraph rank1 ["rank 1"]
          r1_s0_0["s0 #35;0 pull  A[0:2, 0:8] #60;- r0"]
          r1_s1_0["s1 #35;0 copy+sum S[2:4, 0:8] #60;- S[0:2, 0:8]"]
          c1_0(["compute r1 S[0:2, 0:8]"])
        end
        r0_s0_0 --> r0_s0_1
        r0_s0_0 -.-> r1_s0_0
        c1_0 -.-> r1_s1_0
      "
    `);
  });
});
