import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { validatePlan } from "@ovl/chunk-plan";
import { FrontendError } from "../errors.js";
import {
  asyncTpGemm,
  attentionProgram,
  gemmProgram,
  ringAttention,
  treeAttention,
  ulyssesAttention,
  uspAttention,
} from "../search/schedules.js";
import { bufferShape, type Program } from "./ir.js";
import { interpret, macKernel, type PatchKernel } from "./interpret.js";
import { lowerProgram } from "./lower.js";
import { estimateMemory } from "./memory.js";
import { runLowered } from "./run.js";
import { join, parallelize, patch, reorder, replicate, shard, shift, tile } from "./transforms.js";

/** Small distinct integers for every input of `p`. */
function inputsOf(p: Program, seed = 1): Record<string, number[]> {
  return Object.fromEntries(
    p.inputs.map((name, k) => {
      const shape = bufferShape(p, p.buffers.find((b) => b.name === name)!);
      const n = shape.reduce((a, b) => a * b, 1);
      return [name, Array.from({ length: n }, (_, i) => ((i * (7 + k) + seed * 13) % 11) - 5)];
    }),
  );
}

/** Lowers, validates and runs `scheduled` on `mesh`, and checks it computes what `base` computes. */
function checkLowering(base: Program, scheduled: Program, mesh: readonly number[]) {
  const lowered = lowerProgram(scheduled, mesh);
  expect(validatePlan(lowered.plan)).toEqual({ ok: true });
  const inputs = inputsOf(base);
  expect(runLowered(lowered, inputs)).toEqual(interpret(base, inputs));
  return lowered;
}

const attn = attentionProgram({ heads: 4, kvHeads: 2, query: 8, context: 8 });
const gemm = gemmProgram(8, 4, 6);

describe("CommIR primitives", () => {
  it("tile, join and reorder rewrite the nest and keep the semantics", () => {
    const t = tile(gemm, "k", 2);
    expect(t.loops.map((l) => [l.name, l.extent])).toEqual([
      ["m", 8],
      ["n", 4],
      ["k0", 3],
      ["k1", 2],
    ]);
    const j = join(reorder(t, ["k0", "k1", "m", "n"]), "m", "n");
    expect(j.loops.map((l) => l.name)).toEqual(["k0", "k1", "mn"]);
    const inputs = inputsOf(gemm);
    expect(interpret(j, inputs)).toEqual(interpret(gemm, inputs));
  });

  it("reports misuse with typed errors", () => {
    const err = (f: () => unknown): string => {
      try {
        f();
      } catch (e) {
        return (e as FrontendError).code;
      }
      return "none";
    };
    expect(err(() => tile(gemm, "k", 4))).toBe("invalid-transform");
    expect(err(() => tile(gemm, "x", 2))).toBe("unknown-axis");
    expect(err(() => shift(tile(gemm, "m", 2), "m0", "n"))).toBe("invalid-transform");
    expect(err(() => lowerProgram(parallelize(tile(gemm, "m", 2), "m0", 0), [2]))).toBe("mesh-mismatch");
    expect(err(() => shard(gemm, "Z", "m"))).toBe("unknown-buffer");
  });

  it("parallelize shards indexed buffers and replicates the rest (Mercury §4.2)", () => {
    const p = parallelize(tile(gemm, "m", 4, ["m0", "m1"]), "m0", 0);
    expect(p.shards).toEqual({ A: [{ loop: "m0", dim: 0 }], B: [], C: [{ loop: "m0", dim: 0 }] });
    expect(replicate(p, "A", "m0").shards.A).toEqual([]);
  });

  it("patch calls an opaque kernel; the interpreter runs the registered implementation", () => {
    const p = patch(tile(attn, "j", 4, ["j0", "j1"]), "j1", "flash_attention");
    let calls = 0;
    const kernel: PatchKernel = (ctx) => {
      calls++;
      macKernel(ctx);
    };
    const inputs = inputsOf(attn);
    expect(interpret(p, inputs, { kernels: { flash_attention: kernel } })).toEqual(interpret(attn, inputs));
    expect(calls).toBe(4 * 8 * 2);
    expect(() => interpret(p, inputs, { kernels: {} })).toThrow(/flash_attention/);
  });

  it("random sequences of transforms preserve the program's semantics (property)", () => {
    const step = fc.constantFrom("tile", "reorder", "join", "parallelize", "shift");
    fc.assert(
      fc.property(fc.array(step, { maxLength: 6 }), fc.integer({ min: 0, max: 1000 }), (steps, seed) => {
        let p: Program = gemm;
        let rnd = seed;
        const pick = <T>(xs: readonly T[]): T | undefined => xs[(rnd = (rnd * 1103 + 17) % 9973) % Math.max(1, xs.length)];
        for (const s of steps) {
          const locals = p.loops.filter((l) => !l.parallel && !l.shift);
          const l = pick(locals);
          try {
            if (s === "tile" && l) {
              const f = [2, 3].find((x) => l.extent % x === 0 && l.extent > x);
              if (f) p = tile(p, l.name, f, [`${l.name}a${steps.length}`, `${l.name}b${steps.length}`]);
            } else if (s === "reorder") p = reorder(p, [...p.loops.map((x) => x.name)].reverse());
            else if (s === "join") {
              const i = p.loops.findIndex(
                (x, k) =>
                  !x.parallel &&
                  !x.shift &&
                  p.loops[k + 1] &&
                  !p.loops[k + 1]!.parallel &&
                  !p.loops[k + 1]!.shift &&
                  p.loops[k + 1]!.kind === x.kind,
              );
              if (i >= 0) p = join(p, p.loops[i]!.name, p.loops[i + 1]!.name, `q${rnd}`);
            } else if (s === "parallelize" && l) p = parallelize(p, l.name, p.loops.filter((x) => x.parallel).length);
            else if (s === "shift" && l) {
              const par = p.loops.find((x) => x.parallel && x.extent === l.extent);
              if (par) p = shift(p, l.name, par.name);
            }
          } catch (e) {
            if (!(e instanceof FrontendError)) throw e;
          }
        }
        const inputs = inputsOf(gemm, seed);
        expect(interpret(p, inputs)).toEqual(interpret(gemm, inputs));
      }),
      { numRuns: 60 },
    );
  });
});

describe("lowering CommIR to chunk plans", () => {
  it("ring attention: shift becomes ring passes of KV that validate as an all-gather", () => {
    const { plan, facts } = checkLowering(attn, ringAttention(attn, 4), [4]);
    expect(facts.buffers.map((f) => [f.buffer, f.comm])).toEqual([
      ["P", "local"],
      ["KV", "ring"],
      ["O", "local"],
    ]);
    expect(plan.claim).toMatchObject({ collective: "all-gather", tensor: "KV", axis: 1 });
    expect(plan.ranks.every((r) => r.streams[0]!.length === 3 && r.streams[0]!.every((op) => op.kind === "p2p"))).toBe(true);
  });

  it("a two-level shift on a [2, 2] mesh gives a multi-level ring (intra-level passes chained to inter-level ones)", () => {
    const q = parallelize(parallelize(tile(tile(attn, "i", 4, ["i0", "ir"]), "ir", 2, ["i1", "i2"]), "i0", 0), "i1", 1);
    const c = tile(tile(q, "j", 4, ["j0", "jr"]), "jr", 2, ["j1", "j2"]);
    const p = shift(shift(c, "j0", "i0"), "j1", "i1");
    const { plan } = checkLowering(attn, p, [2, 2]);
    const peers = plan.ranks[0]!.streams[0]!.map((op) => (op.kind === "p2p" ? op.peer : -1));
    expect(peers).toEqual([1, 2, 1]);
  });

  it("Ulysses needs no communication; USP rings within the inner level; tree attention all-reduces", () => {
    expect(checkLowering(attn, ulyssesAttention(attn, 2), [2]).plan.ranks.every((r) => r.streams.flat().length === 0)).toBe(true);
    const usp = checkLowering(attn, uspAttention(attn, [2, 2]), [2, 2]);
    expect(usp.facts.buffers.find((f) => f.buffer === "KV")!.group[0]).toEqual([0, 1]);
    const tree = checkLowering(attn, treeAttention(attn, 4), [4]);
    expect(tree.plan.claim).toMatchObject({ collective: "all-reduce", tensor: "O", src: "O_partial" });
  });

  it("AsyncTP GEMM rings A; sharding the output on the reduction loop gives a reduce-scatter", () => {
    const a = checkLowering(gemm, asyncTpGemm(gemm, 2), [2]);
    expect(a.facts.buffers.find((f) => f.buffer === "A")!.comm).toBe("ring");
    const tp = parallelize(tile(gemm, "k", 3, ["k0", "k1"]), "k0", 0);
    const rs = checkLowering(gemm, shard(tp, "C", "k0", 0), [2]);
    expect(rs.plan.claim).toMatchObject({ collective: "reduce-scatter", tensor: "C", axis: 0 });
  });

  it("a sharded read buffer every rank reads whole becomes an all-gather collective", () => {
    const p = shard(parallelize(tile(gemm, "m", 4, ["m0", "m1"]), "m0", 0), "B", "m0", 0);
    const { facts, plan } = checkLowering(gemm, p, [2]);
    expect(facts.buffers.find((f) => f.buffer === "B")!.comm).toBe("all-gather");
    expect(plan.ranks[0]!.streams[0]![0]).toMatchObject({ kind: "collective", collective: "all-gather" });
  });

  it("a sharded buffer walked by a local loop is broadcast block by block from its owners", () => {
    const p = shard(parallelize(tile(tile(gemm, "m", 4, ["m0", "m1"]), "k", 3, ["k0", "k1"]), "m0", 0), "B", "m0", 0);
    const { facts, plan } = checkLowering(gemm, p, [2]);
    const b = facts.buffers.find((f) => f.buffer === "B")!;
    expect(b.comm).toBe("broadcast");
    expect(b.broadcast!.owners).toEqual([
      [0, 1],
      [0, 1],
    ]);
    expect(plan.ranks.map((r) => r.streams[0]!.map((op) => (op.kind === "p2p" ? op.peer : -1)))).toEqual([[1], [0]]);
    expect(estimateMemory(p, [2]).perBuffer.B).toBe(2 * 3 * 4 * 2);
  });

  it("a read that no collective fits (ragged shards) falls back to P2P pulls from the owners", () => {
    const g = gemmProgram(8, 4, 6);
    const p = shard(parallelize(tile(g, "m", 2, ["m0", "m1"]), "m0", 0), "B", "m0", 0);
    const { facts, plan } = checkLowering(g, p, [4]);
    expect(facts.buffers.find((f) => f.buffer === "B")!.comm).toBe("p2p");
    expect(plan.ranks[0]!.streams[0]!.map((op) => (op.kind === "p2p" ? op.peer : -1))).toEqual([1, 2, 3]);
  });

  it("memory per rank never grows with the ring size (property)", () => {
    const big = attentionProgram({ heads: 2, query: 16, context: 16 });
    fc.assert(
      fc.property(fc.constantFrom(1, 2, 4, 8), fc.constantFrom(1, 2, 4, 8), (a, b) => {
        const [lo, hi] = a <= b ? [a, b] : [b, a];
        const mem = (n: number) => estimateMemory(ringAttention(big, n), [n]).maxBytes;
        expect(mem(hi)).toBeLessThanOrEqual(mem(lo));
      }),
      { numRuns: 20 },
    );
  });

  it("lowered plans of random ring schedules validate and compute the loop program (property)", () => {
    fc.assert(
      fc.property(fc.constantFrom(1, 2, 4), fc.constantFrom(1, 2), fc.boolean(), (n, kvDiv, gqa) => {
        const base = attentionProgram({ heads: 4, kvHeads: gqa ? 4 / kvDiv : 4, query: 8, context: 8 });
        checkLowering(base, ringAttention(base, n), [n]);
        checkLowering(base, treeAttention(base, n), [n]);
      }),
      { numRuns: 12 },
    );
  });
});
