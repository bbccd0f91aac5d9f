import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Kernel } from "../../core/manifest/schema.js";
import { runPython } from "../../testing/python.js";
import { EmitError } from "../../core/writer/index.js";
import { planSignals, reduceScatterDirect, reduceScatterRing } from "@ovl/chunk-plan";
import { SIGNAL_BUFFER } from "../../backends/triton/common.js";
import { compile } from "../../compile/compile.js";
import { builtinBody } from "../../core/builtin.js";
import {
  MOE_RS_BUFFERS,
  MOE_RS_DEFAULT_BODY,
  MOE_RS_KINDS,
  moePermuteKernel,
  moeRsNotifyKernel,
  moeRsRunnerKernels,
  moeRsSizes,
  moeTopkSumKernel,
  slabCover,
} from "./triton.js";
import type { OperatorInput } from "../../core/operator.js";
import { rsPlan } from "../../examples/rs-plan.js";

/** Host model of the routing tables: slots grouped by expert (ascending), each group padded to blockM with the sentinel. */
function alignHost(topkIds: number[][], experts: number, blockM: number): { sorted: number[]; numBlocks: number } {
  const flat = topkIds.flat();
  const sentinel = flat.length;
  const sorted: number[] = [];
  for (let e = 0; e < experts; e++) {
    const mine = flat.flatMap((x, slot) => (x === e ? [slot] : []));
    const padded = Math.ceil(mine.length / blockM) * blockM;
    sorted.push(...mine, ...new Array<number>(padded - mine.length).fill(sentinel));
  }
  return { sorted, numBlocks: sorted.length / blockM };
}

const problem = fc
  .record({
    world: fc.constantFrom(1, 2, 4, 8),
    perRank: fc.integer({ min: 1, max: 12 }),
    experts: fc.integer({ min: 1, max: 9 }),
    blockM: fc.constantFrom(1, 2, 4, 8, 16),
    slabDiv: fc.integer({ min: 1, max: 4 }),
  })
  .chain((p) =>
    fc.record({
      p: fc.constant(p),
      topk: fc.integer({ min: 1, max: p.experts }),
      seed: fc.integer(),
    }),
  );

function randomRouting(T: number, experts: number, topk: number, seed: number, only?: number): number[][] {
  let x = seed >>> 0 || 1;
  const next = () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
  return Array.from({ length: T }, () => {
    const pool = Array.from({ length: experts }, (_, e) => e);
    if (only !== undefined) return [only, ...pool.filter((e) => e !== only).slice(0, topk - 1)];
    const picked: number[] = [];
    for (let j = 0; j < topk; j++) picked.push(...pool.splice(Math.floor(next() * pool.length), 1));
    return picked;
  });
}

describe("moeRsSizes", () => {
  it("derives slabs, owners' counts, notifies and reducer items from the problem", () => {
    const s = moeRsSizes({ tokens: 64, inter: 96, hidden: 200, world: 4, slabT: 8 }, { experts: 6, topk: 2 }, { BM: 16, BN: 64, BK: 32 });
    expect(s.rowsPerRank).toBe(16);
    expect(s.slabs).toBe(8);
    expect(s.slabsPerRank).toBe(2);
    expect(s.slabsP2).toBe(8);
    expect(s.nTiles).toBe(4);
    expect(s.notifiesPerCover).toBe(16);
    expect(s.reduceItems).toBe(2 * 1 * 4);
    expect(s.align.slots).toBe(128);
    expect(s.align.maxBlocks).toBe(Math.ceil((128 + 6 * 15) / 16));
  });

  it("defaults the slab to T/W (one per rank)", () => {
    const s = moeRsSizes({ tokens: 24, inter: 8, hidden: 8, world: 3 }, { experts: 4, topk: 2 }, { BM: 8, BN: 8, BK: 8 });
    expect(s.slabT).toBe(8);
    expect(s.slabs).toBe(3);
    expect(s.slabsPerRank).toBe(1);
  });

  it.each([
    [{ tokens: 10, inter: 8, hidden: 8, world: 4 }, { experts: 4, topk: 2 }, { BM: 8, BN: 8, BK: 8 }, /divide evenly over the world/],
    [
      { tokens: 16, inter: 8, hidden: 8, world: 2, slabT: 3 },
      { experts: 4, topk: 2 },
      { BM: 8, BN: 8, BK: 8 },
      /positive divisor of T\/W = 8/,
    ],
    [{ tokens: 16, inter: 0, hidden: 8, world: 2 }, { experts: 4, topk: 2 }, { BM: 8, BN: 8, BK: 8 }, /inter/],
    [{ tokens: 16, inter: 8, hidden: 8, world: 2 }, { experts: 2, topk: 3 }, { BM: 8, BN: 8, BK: 8 }, /exceeds moe.experts/],
    [{ tokens: 16, inter: 8, hidden: 8, world: 2 }, undefined, { BM: 8, BN: 8, BK: 8 }, /needs moe/],
    [{ tokens: 16, inter: 8, hidden: 8, world: 2 }, { experts: 4, topk: 2 }, { BM: 12, BN: 8, BK: 8 }, /tile.BM must be a power of two/],
    [{ tokens: 16, inter: 8, hidden: 8, world: 2 }, { experts: 4, topk: 2 }, { BM: 8, BN: 8, BK: 8, BT: 0 }, /tile.BT/],
  ])("refuses %j / %j / %j", (p, moe, tile, message) => {
    const run = () => moeRsSizes(p, moe, tile);
    expect(run).toThrow(EmitError);
    expect(run).toThrow(message);
  });

  it("accepts every even split and its slab divisors (property)", () => {
    fc.assert(
      fc.property(problem, ({ p, topk }) => {
        const slabT = p.perRank % p.slabDiv === 0 ? p.perRank / p.slabDiv : p.perRank;
        const s = moeRsSizes(
          { tokens: p.perRank * p.world, inter: 8, hidden: 40, world: p.world, slabT },
          { experts: p.experts, topk },
          { BM: p.blockM, BN: 16, BK: 16 },
        );
        expect(s.slabs * s.slabT).toBe(s.tokens);
        expect(s.slabsPerRank * s.world).toBe(s.slabs);
        expect(s.slabsP2).toBeGreaterThanOrEqual(Math.max(2, s.slabs));
        expect(s.slabsP2 & (s.slabsP2 - 1)).toBe(0);
      }),
    );
  });
});

describe("slabCover", () => {
  it("counts, per slab, the blocks whose token range holds it, for fresh random routings (property)", () => {
    fc.assert(
      fc.property(problem, fc.option(fc.nat(), { nil: undefined }), ({ p, topk, seed }, onlyPick) => {
        const T = p.perRank * p.world;
        const slabT = p.perRank % p.slabDiv === 0 ? p.perRank / p.slabDiv : p.perRank;
        const s = moeRsSizes(
          { tokens: T, inter: 8, hidden: 8, world: p.world, slabT },
          { experts: p.experts, topk },
          { BM: p.blockM, BN: 8, BK: 8 },
        );
        // All tokens on one expert when onlyPick is set; otherwise a fresh random routing (experts may get no tokens).
        const ids = randomRouting(T, p.experts, topk, seed, onlyPick === undefined ? undefined : onlyPick % p.experts);
        const { sorted, numBlocks } = alignHost(ids, p.experts, p.blockM);
        expect(numBlocks).toBeLessThanOrEqual(s.align.maxBlocks);
        const cover = slabCover(sorted, numBlocks, s);
        const brute = new Array<number>(s.slabs).fill(0);
        for (let b = 0; b < numBlocks; b++) {
          const slabsOf = sorted
            .slice(b * p.blockM, (b + 1) * p.blockM)
            .filter((x) => x < T * topk)
            .map((x) => Math.floor(x / topk / slabT));
          if (slabsOf.length === 0) continue;
          for (let x = Math.min(...slabsOf); x <= Math.max(...slabsOf); x++) brute[x] = (brute[x] ?? 0) + 1;
        }
        expect(cover).toEqual(brute);
        // Each token has k slots, so every slab is covered by at least one block.
        for (const c of cover) expect(c).toBeGreaterThanOrEqual(1);
      }),
    );
  });
});

describe("moeRsRunnerKernels", () => {
  it("are valid manifest kernels whose arguments and constexprs are the runner functions' parameters, in order", () => {
    const src = readFileSync(
      join(fileURLToPath(new URL(".", import.meta.url)), "../../../../runtime-py/src/ovl_runtime/operators/moe_rs/kernels.py"),
      "utf8",
    );
    const params = JSON.parse(
      runPython(
        "import ast, json, sys\nt = ast.parse(sys.stdin.read())\nprint(json.dumps({f.name: [a.arg for a in f.args.args] for f in t.body if isinstance(f, ast.FunctionDef)}))",
        src,
      ),
    ) as Record<string, string[]>;
    fc.assert(
      fc.property(problem, fc.integer({ min: 1, max: 8 }), ({ p, topk }, reducers) => {
        const slabT = p.perRank % p.slabDiv === 0 ? p.perRank / p.slabDiv : p.perRank;
        const tile = { BM: p.blockM, BN: 16, BK: 16, BT: 8 };
        const s = moeRsSizes(
          { tokens: p.perRank * p.world, inter: 8, hidden: 40, world: p.world, slabT },
          { experts: p.experts, topk },
          tile,
        );
        const kernels = moeRsRunnerKernels(s, tile, "op_moe_rs.py", reducers);
        const launch = moeRsRunnerKernels(s, tile, "op_moe_rs.py", reducers, "launch");
        const extra = [moeRsNotifyKernel(s, "op_moe_rs.py"), moePermuteKernel(s, "op_moe_rs.py"), moeTopkSumKernel(s, "op_moe_rs.py")];
        for (const k of [...kernels, ...launch, ...extra]) {
          expect(Kernel.safeParse(k).success).toBe(true);
          // Every parameter bound once (the runner calls by keyword), as an argument or a constexpr.
          const bound = [...k.args.map((a) => a.name), ...Object.keys(k.constexprs)];
          expect([...bound].sort()).toEqual([...(params[k.entry] ?? [])].sort());
        }
        const [expectK, reduceK] = kernels;
        expect(expectK?.args.find((a) => a.name === "NOTIFIES")?.value).toEqual({ kind: "int", value: p.world * s.nTiles });
        expect(expectK?.constexprs.PER_BLOCK).toBe(true);
        // One launch notify per rank: every slab expects the world, whatever the routing.
        expect(launch[0]?.args.find((a) => a.name === "NOTIFIES")?.value).toEqual({ kind: "int", value: p.world });
        expect(launch[0]?.constexprs.PER_BLOCK).toBe(false);
        // Per launch the reducer follows the local TopK-sum on the compute stream, on every SM, pulling token rows.
        expect(launch[1]).toMatchObject({ stream: "compute", grid: [{ kind: "num-sms", cap: s.reduceItems }] });
        expect(launch[1]?.constexprs.TOP_K).toBe(1);
        expect(launch[1]?.args.find((a) => a.name === "partial_ptrs")?.value).toEqual({
          kind: "peer-pointers",
          buffer: MOE_RS_BUFFERS.partialTok,
        });
        expect(launch[1]?.args.find((a) => a.name === "NUM_PROGRAMS")?.value).toEqual({ kind: "num-programs" });
        expect(reduceK?.grid).toEqual([Math.min(reducers, s.reduceItems)]);
        expect(reduceK?.constexprs.NUM_PROGRAMS).toBe(Math.min(reducers, s.reduceItems));
      }),
      { numRuns: 40 },
    );
  });
});

describe("compileMoeRs", () => {
  const slotsPlan = (tokens: number, topk: number, hidden: number, world: number, split: number, ring = false) => {
    const o = {
      tensor: { name: "moe_slots", shape: [tokens * topk, hidden], dtype: "bf16" as const },
      src: "moe_slots_partial",
      axis: 0,
      mesh: [world],
      split,
      afterCompute: true,
    };
    return planSignals(ring ? reduceScatterRing(o) : reduceScatterDirect(o));
  };
  const op = (over: Partial<OperatorInput> = {}): OperatorInput => ({
    name: "mrs",
    kind: "moe-rs",
    plan: slotsPlan(64, 2, 96, 4, 2),
    body: builtinBody("moe_gemm_scatter"),
    problem: { M: 64, N: 96, K: 32 },
    moe: { experts: 6, topk: 2 },
    tile: { BM: 16, BN: 32, BK: 16 },
    ...over,
  });

  it("emits the routing, slab-expect, transformed producer and comm-stream reducer, notifying each slab on its owner", async () => {
    const r = await compile(op());
    const m = r.manifest;
    expect(m.kernels.map((k) => [k.template.kind, k.stream])).toEqual([
      ["moe-align-count", "compute"],
      ["moe-align-scatter", "compute"],
      ["moe-slab-expect", "compute"],
      ["local-producer", "compute"],
      ["moe-topk-reduce-rs", "comm"],
    ]);
    // 4 ranks × split 2 = 8 slabs of 8 tokens, plus each rank's ready slot.
    expect(m.signals.slots).toBe(9);
    expect(m.buffers.find((b) => b.name === MOE_RS_BUFFERS.topkWeights)).toMatchObject({ dtype: "fp32", init: "replicated" });
    expect(m.buffers.find((b) => b.name === MOE_RS_BUFFERS.partial)).toMatchObject({ shape: [128, 96], symmetric: true });
    expect(m.buffers.find((b) => b.name === MOE_RS_BUFFERS.out)?.shape).toEqual([16, 96]);
    expect(m.reference).toMatchObject({ operator: "moe-rs", M: 64, N: 96, K: 32, rowsPerRank: 16 });
    const producer = m.kernels[3] as (typeof m.kernels)[number];
    expect(producer.args.find((a) => a.name === "ovl_sig_ptrs")?.value).toEqual({ kind: "peer-pointers", buffer: SIGNAL_BUFFER });
    expect(producer.tileProgram?.owners).toBeDefined();
    const text = r.files.find((f) => f.path === producer.source)?.text ?? "";
    // The notify loop follows the tile's stores: every slab between the block's first and last token, on its owner.
    expect(text.indexOf("tl.store(c_ptrs")).toBeGreaterThan(0);
    const notify = "peer_notify_many(ovl_sig_ptrs, ovl_seg // 2, ovl_slot0, (ovl_in < ovl_end) & (ovl_slot0 >= 0))";
    expect(text.indexOf(notify)).toBeGreaterThan(text.indexOf("tl.store(c_ptrs"));
    expect(text).toContain("ovl_in = ovl_lo // 8 + tl.arange(0, 8)");
    expect(text).toContain("ovl_seg = tl.minimum(ovl_in, 7)");
    expect(text).toContain("from ovl_runtime.language import peer_notify_many");
  });

  it("takes its slabs from the plan's chunks for any world, split and top-k (property)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(1, 2, 4, 8),
        fc.constantFrom(1, 2, 4),
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 4 }),
        async (world, split, perSplit, topk) => {
          const perRank = split * perSplit * 2;
          const T = perRank * world;
          const m = (
            await compile(op({ plan: slotsPlan(T, topk, 40, world, split), problem: { M: T, N: 40, K: 24 }, moe: { experts: 4, topk } }))
          ).manifest;
          expect(m.signals.slots).toBe(world * split + 1);
          const expectK = m.kernels.find((k) => k.template.kind === "moe-slab-expect");
          expect(expectK?.args.find((a) => a.name === "SLAB_T")?.value).toEqual({ kind: "int", value: perRank / split });
          expect(expectK?.args.find((a) => a.name === "READY_SLOT")?.value).toEqual({ kind: "int", value: world * split });
        },
      ),
      { numRuns: 12 },
    );
  });

  it("refuses a ring plan, chunks that are not whole tokens, a gather plan and a consumer body, before emitting", async () => {
    await expect(compile(op({ plan: slotsPlan(64, 2, 96, 4, 2, true) }))).rejects.toThrow(
      /push p2p op; moe-rs realises a direct ReduceScatter/,
    );
    // 3 tokens per rank, k = 2, split 2: chunks of 3 slot rows cut tokens in half.
    await expect(compile(op({ plan: slotsPlan(12, 2, 96, 4, 2), problem: { M: 12, N: 96, K: 32 } }))).rejects.toThrow(
      /slabs are whole tokens/,
    );
    await expect(compile(op({ plan: slotsPlan(64, 2, 50, 4, 2) }))).rejects.toThrow(/reduces the slot rows \[T·k, H\] = \[128, 96\]/);
    await expect(compile(op({ body: builtinBody("moe_gather_gemm") }))).rejects.toThrow(/a moe-rs body is a producer/);
    await expect(compile(op({ moe: { experts: 2, topk: 3 } }))).rejects.toThrow(EmitError);
  });

  it("refuses a body that scatters through a table in a GEMM+ReduceScatter, which notifies per tile", async () => {
    const plan = rsPlan(2, 128, 96, 1);
    await expect(compile(op({ kind: "gemm-rs", plan, problem: { M: 128, N: 96, K: 32 } }))).rejects.toThrow(
      /compile it as an operator that scatters rows \(moe-rs\)/,
    );
  });
  it("compiles the warp-specialised default body as written, filling h in block order before it and notifying once per launch after it", async () => {
    const ws = builtinBody(MOE_RS_DEFAULT_BODY);
    const r = await compile(op({ body: ws }));
    const m = r.manifest;
    expect(m.kernels.map((k) => [k.template.kind, k.stream])).toEqual([
      ["moe-align-count", "compute"],
      ["moe-align-scatter", "compute"],
      [MOE_RS_KINDS.permute, "compute"],
      ["moe-slab-expect", "compute"],
      ["local-producer", "compute"],
      [MOE_RS_KINDS.topkSum, "compute"],
      [MOE_RS_KINDS.notify, "compute"],
      ["moe-topk-reduce-rs", "compute"],
    ]);
    const producer = m.kernels[4] as (typeof m.kernels)[number];
    // Nothing inserted: no signal arguments, the body's text below the header byte for byte.
    expect(producer.args.some((a) => a.name.startsWith("ovl_"))).toBe(false);
    expect(producer.tileProgram?.slots).toEqual([]);
    expect(producer.template.params).toMatchObject({ a: MOE_RS_BUFFERS.hBlocks, aLayout: "blocks", notifies: "launch" });
    expect([producer.numWarps, producer.numStages]).toEqual([4, 4]);
    const text = r.files.find((f) => f.path === producer.source)?.text ?? "";
    const body = ws.source.slice(ws.source.indexOf("@triton.jit"));
    expect(text.endsWith(body)).toBe(true);
    expect(text).not.toContain("ovl_runtime.language");
    // h in block order: a row per entry of every possible block, bound to the body's blocks= parameter.
    expect(m.buffers.find((b) => b.name === MOE_RS_BUFFERS.hBlocks)?.shape).toEqual([(m.kernels[2]?.grid[0] as number) * 16, 32]);
    expect(producer.args.find((a) => a.name === "h_blocks")?.value).toEqual({ kind: "buffer", name: MOE_RS_BUFFERS.hBlocks });
    const expectK = m.kernels[3];
    expect(expectK?.constexprs.PER_BLOCK).toBe(false);
    expect(expectK?.args.find((a) => a.name === "NOTIFIES")?.value).toEqual({ kind: "int", value: 4 });
    expect(m.kernels[6]?.args.find((a) => a.name === "sig_ptrs")?.value).toEqual({ kind: "peer-pointers", buffer: SIGNAL_BUFFER });
    // The owners pull the token rows the local TopK-sum writes: only those are symmetric.
    expect(m.buffers.find((b) => b.name === MOE_RS_BUFFERS.partialTok)).toMatchObject({ shape: [64, 96], symmetric: true });
    expect(m.buffers.find((b) => b.name === MOE_RS_BUFFERS.partial)?.symmetric).toBe(false);
  });

  it("fills h in block order for a body that reads it so and still notifies per tile when its loop is not warp-specialised", async () => {
    const ws = builtinBody(MOE_RS_DEFAULT_BODY);
    const plainLoop = ws.source.replace(", warp_specialize=True)", ")");
    expect(plainLoop).not.toBe(ws.source);
    const m = (await compile(op({ body: { path: "blocks_tiles.py", source: plainLoop } }))).manifest;
    expect(m.kernels.map((k) => k.template.kind)).toEqual([
      "moe-align-count",
      "moe-align-scatter",
      MOE_RS_KINDS.permute,
      "moe-slab-expect",
      "local-producer",
      "moe-topk-reduce-rs",
    ]);
    const producer = m.kernels[4];
    expect(producer?.args.find((a) => a.name === "ovl_sig_ptrs")).toBeDefined();
    expect(producer?.tileProgram?.slots.length).toBe(1);
    expect(m.kernels[3]?.constexprs.PER_BLOCK).toBe(true);
  });

  it("refuses a warp-specialised body in an operator that notifies per tile", async () => {
    const source = builtinBody("gemm_producer").source.replace("flatten=False):", "flatten=False, warp_specialize=True):");
    expect(source).toContain("warp_specialize=True");
    const plan = rsPlan(2, 128, 96, 1);
    await expect(
      compile(op({ kind: "gemm-rs", plan, body: { path: "ws_producer.py", source }, problem: { M: 128, N: 96, K: 32 }, moe: undefined })),
    ).rejects.toThrow(/warp-specialised \(warp_specialize=True\), and this operator notifies per tile/);
  });
});
