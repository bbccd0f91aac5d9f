import {
  allReducePartitioned,
  allReduceTilewise,
  collectiveDirect,
  planSignals,
  reduceScatterDirect,
  type ChunkPlan,
} from "@ovl/chunk-plan";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { AR_TILE_FIELDS, SLOT_WAIT_FIELDS, SM_PUSH_FIELDS, TILE_PUSH_FIELDS } from "../../backends/triton/kernels/index.js";
import { Manifest } from "../../core/manifest/schema.js";
import { parseWithPython } from "../../testing/python.js";
import { EmitError } from "../../core/writer/index.js";
import { allReduceForm } from "./movements.js";
import { AR_BROADCAST_BLOCK_N, emitGemmArPartitioned } from "./partitioned.js";
import { builtinBody, compile, type Operator } from "../../index.js";
import { operatorSchedule } from "../../schedule/operator-schedule.js";

const TILE = { BM: 32, BN: 32, BK: 32 };
const C = (M: number, N: number, world: number) => ({
  tensor: { name: "C", shape: [M, N], dtype: "bf16" as const },
  src: "C_partial",
  mesh: [world],
});

function partitioned(M: number, N: number, world: number, split = 2, more: Partial<Parameters<typeof allReducePartitioned>[0]> = {}) {
  return planSignals(
    allReducePartitioned({ ...C(M, N, world), axis: 0, split, reduceScatter: "direct", allGather: "swizzle", afterCompute: true, ...more }),
  );
}

function tilewise(M: number, N: number, world: number, tile = [TILE.BM, TILE.BN]) {
  return planSignals(allReduceTilewise({ ...C(M, N, world), tile }));
}

function arOp(plan: ChunkPlan, M: number, N: number, K: number, options: Operator["options"] = {}, tile = TILE): Operator {
  return { name: "gemm_ar", kind: "gemm-ar", plan, body: builtinBody("gemm_producer"), problem: { M, N, K }, tile, groupM: 2, options };
}

async function refusal(p: Promise<unknown>): Promise<EmitError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof EmitError) return e;
    throw e;
  }
  throw new Error("compiled, but a refusal was expected");
}

const FIELDS: Readonly<Record<string, readonly string[]>> = {
  "sm-push": SM_PUSH_FIELDS,
  "tile-push": TILE_PUSH_FIELDS,
  "ar-tile-reduce": AR_TILE_FIELDS,
  "slot-wait": SLOT_WAIT_FIELDS,
};

/**
 * Every index the manifest's tables and host ops hold is in range: slots inside the signal
 * buffer, ranks inside the world, every copy and every tile (rows × cols at its row stride)
 * inside the buffer it names, rows of one length per rank.
 */
function checkRanges(m: Manifest): void {
  const size = (name: string) => m.buffers.find((b) => b.name === name)!.shape.reduce((a, b) => a * b, 1);
  const slot = (s: number, what: string) => expect(s >= -1 && s < m.signals.slots, `${what}: slot ${s} of ${m.signals.slots}`).toBe(true);
  for (const t of m.tables) {
    expect(t.values).toHaveLength(m.world);
    expect(new Set(t.values.map((v) => v.length)).size).toBe(1);
  }
  for (const h of m.hostOps) {
    for (const s of h.streams) {
      for (const op of s.ops) {
        if (op.kind === "wait") {
          slot(op.slot, `rank ${h.rank} ${s.name} wait`);
          continue;
        }
        for (const seg of [op.src, op.dst]) {
          expect(seg.rank).toBeLessThan(m.world);
          expect(seg.offset + seg.length).toBeLessThanOrEqual(size(seg.buffer));
        }
        if (op.signal !== undefined) slot(op.signal.slot, `rank ${h.rank} ${s.name} signal`);
      }
    }
  }
  for (const k of m.kernels) {
    const arg = (n: string) => k.args.find((a) => a.name === n)?.value;
    const int = (n: string) => {
      const a = arg(n);
      return a?.kind === "int" ? a.value : 0;
    };
    const buffer = (n: string) => {
      const a = arg(n);
      return a?.kind === "buffer" ? a.name : a?.kind === "peer-pointers" ? a.buffer : "";
    };
    if (k.template.kind === "ar-reduce") {
      const blocks = int("rows_per_rank") / (k.constexprs.BLOCK_M as number);
      slot(int("done_base") + blocks - 1, "ar-reduce done");
      expect(m.world * int("rows_per_rank") * int("N")).toBe(size(buffer("out_ptr")));
    }
    if (k.template.kind === "ar-reduce-broadcast") {
      slot(int("recv_base") + m.world - 1, "ar-reduce-broadcast recv");
      expect(m.world * int("rows_per_rank") * int("N")).toBe(size(buffer("out_ptrs")));
    }
    const fields = FIELDS[k.template.kind];
    const seg = arg("seg_ptr");
    if (fields === undefined || seg?.kind !== "table") continue;
    const table = m.tables.find((t) => t.name === seg.name)!;
    for (const [rank, flat] of table.values.entries()) {
      expect(flat.length).toBe(int("num_segments") * fields.length);
      for (let i = 0; i < flat.length; i += fields.length) {
        const row = Object.fromEntries(fields.map((f, j) => [f, flat[i + j]!]));
        slot(row.wait_at!, `${k.name} rank ${rank} wait`);
        if (k.template.kind === "slot-wait") continue;
        slot(row.notify_at!, `${k.name} rank ${rank} notify`);
        if (k.template.kind === "sm-push") {
          expect(row.dst_rank).toBeLessThan(m.world);
          expect(row.src_offset! + row.length!).toBeLessThanOrEqual(size(buffer("src_ptr")));
          expect(row.dst_offset! + row.length!).toBeLessThanOrEqual(size(buffer("dst_ptrs")));
          continue;
        }
        if (row.rows === 0) continue;
        const stride = int("row_stride");
        const end = (offset: number) => offset + (row.rows! - 1) * stride + row.cols!;
        expect(row.cols).toBeLessThanOrEqual(stride);
        if (k.template.kind === "tile-push") {
          expect(row.dst_rank).toBeLessThan(m.world);
          expect(end(row.src_offset!)).toBeLessThanOrEqual(size(buffer("src_ptr")));
          expect(end(row.dst_offset!)).toBeLessThanOrEqual(size(buffer("dst_ptrs")));
        } else {
          expect(end(row.own_offset!)).toBeLessThanOrEqual(size(buffer("own_ptr")));
          expect(end((m.world - 1) * int("slab_elems") + row.part_offset!)).toBeLessThanOrEqual(size(buffer("part_ptr")));
          expect(end(row.out_offset!)).toBeLessThanOrEqual(size(buffer("out_ptrs")));
          slot(int("done_at"), `${k.name} done`);
        }
      }
    }
  }
}

describe("compile: GEMM+AllReduce", () => {
  it.each([2, 3, 4, 8])("compiles the partitioned AllReduce (copy engine and SM) and the tile-wise one at world %i", async (world) => {
    const M = world * 64;
    const N = 96;
    const cases = [
      // The notify scope: gpu only where this rank's own push kernel alone waits on the tile-done
      // slots; a host stream (copy engine) waits, or peers' pushes add to the same flags (tile-wise).
      {
        plan: partitioned(M, N, world),
        options: { backend: "copy-engine" as const },
        kinds: ["local-producer", "ar-reduce"],
        gpu: false,
        hostDone: true,
      },
      {
        plan: partitioned(M, N, world),
        options: { backend: "sm" as const },
        kinds: ["local-producer", "sm-push", "ar-reduce-broadcast", "slot-wait"],
        gpu: true,
        hostDone: false,
      },
      {
        plan: tilewise(M, N, world),
        options: {},
        kinds: ["local-producer", "tile-push", "ar-tile-reduce", "slot-wait"],
        gpu: false,
        hostDone: false,
      },
    ];
    for (const c of cases) {
      const r = await compile(arOp(c.plan, M, N, 64, c.options));
      const m = Manifest.parse(r.manifest);
      expect(m.kernels.map((k) => k.template.kind)).toEqual(c.kinds);
      expect(m.reference).toMatchObject({ operator: "gemm-ar", M, N, K: 64, output: "ar_out" });
      expect(m.buffers.find((b) => b.name === "ar_out")).toMatchObject({ shape: [M, N], symmetric: true, init: "poison" });
      expect(m.kernels[0]!.template.params.operator).toBe("gemm-ar");
      const producer = r.files.find((f) => f.path === m.kernels[0]!.source)!.text;
      expect(producer.includes("notify_slot_gpu_if(ovl_sig_ptr, ovl_prev0, ovl_due0, ovl_cnt0)")).toBe(c.gpu);
      expect(producer.includes("notify_slot_if(ovl_sig_ptr, ovl_prev0, ovl_due0, ovl_cnt0)")).toBe(!c.gpu);
      // Every rank's launch ends with its whole output in place: its last host stream waits for it
      // (copy engine), or a slot-wait kernel does and no host stream waits (a CUDA graph captures it).
      if (c.hostDone) for (const h of m.hostOps) expect(h.streams.at(-1)?.name).toBe("ar_done");
      else {
        expect(m.hostOps.flatMap((h) => h.streams.flatMap((st) => st.ops)).filter((o) => o.kind === "wait")).toEqual([]);
        expect(m.kernels.at(-1)).toMatchObject({ name: "ar_done", stream: "compute", grid: [1] });
      }
      checkRanges(m);
      const parsed = parseWithPython(Object.fromEntries(r.files.map((f) => [f.path, f.text])));
      expect(Object.values(parsed)).toEqual(r.files.map(() => "ok"));
    }
  });

  it("partitioned: each chunk of reduced rows is copied after the reduce signals its m-blocks, once per peer, with a signal each", async () => {
    const r = await compile(arOp(partitioned(256, 64, 2, 2), 256, 64, 64, { backend: "copy-engine" }));
    const m = r.manifest;
    const reduce = m.kernels.find((k) => k.template.kind === "ar-reduce")!;
    const doneBase = reduce.template.params.done_base as number;
    const gather = m.hostOps[0]!.streams.find((s) => s.name === "allgather")!.ops;
    // Rank 0's slab is 4 m-blocks of 32 rows in 2 chunks: wait on 2 reduced slots, copy, twice.
    expect(gather.map((o) => o.kind)).toEqual(["wait", "wait", "copy", "wait", "wait", "copy"]);
    expect(gather.filter((o) => o.kind === "wait").map((o) => o.slot)).toEqual([doneBase, doneBase + 1, doneBase + 2, doneBase + 3]);
    for (const o of gather) {
      if (o.kind !== "copy") continue;
      expect(o.src).toMatchObject({ buffer: "ar_out", rank: 0 });
      expect(o.dst).toMatchObject({ buffer: "ar_out", rank: 1, offset: o.src.offset, length: 64 * 64 });
      expect(o.signal?.rank).toBe(1);
    }
    expect(r.files.find((f) => f.path === "ar_reduce.py")!.text).toContain("notify_slot(sig_ptr, done_base + mb)");
  });

  it("partitioned over SM: one kernel reduces and stores every slab into every rank; each rank's last kernel waits for its peers' slabs", async () => {
    const world = 4;
    const r = await compile(arOp(partitioned(512, 64, world, 2), 512, 64, 64, { backend: "sm" }));
    const m = r.manifest;
    const reduce = m.kernels.find((k) => k.template.kind === "ar-reduce-broadcast")!;
    expect(reduce.constexprs.BLOCK_N).toBe(AR_BROADCAST_BLOCK_N);
    const base = reduce.template.params.recv_base as number;
    // Slab of 128 rows and 64 columns: 4 m-blocks of 32 rows (the body's tile) × one 64-column block.
    const tiles = (128 / (reduce.constexprs.BLOCK_M as number)) * Math.ceil(64 / (reduce.constexprs.BLOCK_N as number));
    const waits = m.tables.find((t) => t.name === "ar_done_slots")!;
    for (let rank = 0; rank < world; rank++) {
      const peers = [0, 1, 2, 3].filter((q) => q !== rank);
      expect(waits.values[rank]).toEqual(peers.flatMap((q) => [base + q, tiles]));
    }
    expect(tiles).toBe(4);
    expect(m.signals.slots).toBe(base + world);
    // options.reduceBlockN names the broadcast's tile width too: 32 columns, 8 tiles a slab.
    const narrow = (await compile(arOp(partitioned(512, 64, world, 2), 512, 64, 64, { backend: "sm", reduceBlockN: 32 }))).manifest;
    expect(narrow.kernels.find((k) => k.template.kind === "ar-reduce-broadcast")!.constexprs.BLOCK_N).toBe(32);
    expect(narrow.tables.find((t) => t.name === "ar_done_slots")!.values[0]).toEqual([base + 1, 8, base + 2, 8, base + 3, 8]);
    expect(m.signals.bits).toBe(32);
    expect(m.buffers.find((b) => b.name === "signals")!.dtype).toBe("int32"); // no host writes
    const text = r.files.find((f) => f.path === "ar_reduce_broadcast.py")!.text;
    expect(text).toContain("peer_notify(sig_ptrs, p, recv_base + rank, stored)");
    // The AllGather half is the reduction's stores: no second push kernel, no gather table.
    expect(m.kernels.filter((k) => k.template.kind === "sm-push").map((k) => k.name)).toEqual(["sm_push"]);
    expect(m.tables.some((t) => t.name === "gather_segments")).toBe(false);
  });

  it("partitioned over SM refuses an AllGather half that does not send every slab whole to every peer", () => {
    const plan = partitioned(128, 64, 2, 1);
    const form = allReduceForm(plan, 128, 64);
    if (form.kind !== "partitioned") throw new Error("expected the partitioned form");
    const rs = planSignals(form.reduceScatter);
    const schedule = operatorSchedule({ ...arOp(rs, 128, 64, 64), plan: rs }, form.src, "producer", true);
    expect(emitGemmArPartitioned(rs, schedule, form.gathers, { backend: "sm" }).manifest.kernels).toHaveLength(4);
    const e = (() => {
      try {
        emitGemmArPartitioned(rs, schedule, form.gathers.slice(1), { backend: "sm" });
      } catch (err) {
        return err as EmitError;
      }
      throw new Error("emitted, but a refusal was expected");
    })();
    expect(e.code).toBe("unsupported-op");
    expect(e.message).toMatch(/does not carry rank \d's whole slab .* to rank \d once.*allReducePartitioned/);
  });

  it("tile-wise: the producer notifies one flag per tile, its own tile id; the reduce waits for the owner's tile and every peer's push", async () => {
    const r = await compile(arOp(tilewise(128, 64, 4), 128, 64, 64));
    const producer = r.files[0]!.text;
    expect(producer).toContain("ovl_slot0 = ovl_t2");
    const m = r.manifest;
    const rows = m.tables.find((t) => t.name === "ar_tile_rows")!;
    // 4 m-blocks × 2 n-blocks: each rank owns one m-block, so two tiles, each waited for with 4 arrivals.
    expect(rows.values[1]!.filter((_, i) => i % AR_TILE_FIELDS.length === AR_TILE_FIELDS.indexOf("wait_arrivals"))).toEqual([4, 4]);
    expect(rows.values[1]!.filter((_, i) => i % AR_TILE_FIELDS.length === AR_TILE_FIELDS.indexOf("wait_at"))).toEqual([2, 3]);
    const push = m.tables.find((t) => t.name === "tile_push_rows")!;
    // Rank 1 pushes the 6 tiles it does not own, rank 2's first (it computes them first).
    const owners = push.values[1]!.filter((_, i) => i % TILE_PUSH_FIELDS.length === TILE_PUSH_FIELDS.indexOf("dst_rank"));
    expect(owners).toEqual([2, 2, 3, 3, 0, 0]);
  });

  it("tile-wise takes any M (m-blocks owned in contiguous runs), a whole-tensor all-reduce collective, and plan tiles unlike the body's", async () => {
    for (const [M, world] of [
      [200, 3],
      [96, 8],
    ] as const) {
      const r = await compile(arOp(tilewise(M, 64, world), M, 64, 32));
      checkRanges(r.manifest);
    }
    const direct = planSignals(
      collectiveDirect({
        tensor: { name: "C", shape: [128, 64], dtype: "bf16" },
        axis: 0,
        mesh: [2],
        collective: "all-reduce",
        src: "C_partial",
      }),
    );
    const d = await compile(arOp(direct, 128, 64, 32));
    expect(d.manifest.kernels.map((k) => k.template.kind)).toEqual(["local-producer", "tile-push", "ar-tile-reduce", "slot-wait"]);
    const coarse = await compile(arOp(tilewise(128, 64, 2, [64, 64]), 128, 64, 32));
    expect(coarse.manifest.tables.find((t) => t.name === "ar_tile_rows")!.values[0]!.length).toBe(4 * AR_TILE_FIELDS.length);
  });

  it("refuses what it cannot realise, naming the nearest plan that works", async () => {
    const M = 128;
    const cases: [ChunkPlan, Operator["options"], string, RegExp][] = [
      [
        partitioned(M, 64, 2, 1, { reduceScatter: "ring" }),
        {},
        "unsupported-dependency",
        /GEMM\+RS deliveries.*allReducePartitioned\(\{ reduceScatter: 'direct'/,
      ],
      [partitioned(M, 64, 4, 1, { allGather: "ring-push" }), {}, "unsupported-op", /does not own them.*allReducePartitioned/],
      [
        planSignals(allReduceTilewise({ ...C(M, 64, 2), tile: [32, 32], path: "p2p" })),
        {},
        "unsupported-op",
        /no AllGather half.*allReduceTilewise/,
      ],
      [tilewise(M, 64, 2), { backend: "copy-engine" }, "unsupported-op", /copy engine copies contiguous runs.*backend "sm"/],
      [partitioned(M, 64, 2, 1, { afterCompute: false }), {}, "bad-plan", /never waits on compute.*allReducePartitioned/],
      [
        planSignals(reduceScatterDirect({ ...C(M, 64, 2), axis: 0, split: 1, afterCompute: true })),
        {},
        "bad-plan",
        /claims a reduce-scatter.*allReduceTilewise/,
      ],
    ];
    for (const [plan, options, code, message] of cases) {
      const e = await refusal(compile(arOp(plan, M, 64, 64, options)));
      expect({ code: e.code, message: e.message }).toMatchObject({ code, message: expect.stringMatching(message) });
    }
    // 3 ranks × 40 rows is no whole number of 32-row m-blocks per rank: partitioned refuses, tile-wise takes it.
    const e = await refusal(compile(arOp(partitioned(120, 64, 3, 1), 120, 64, 64)));
    expect(e.code).toBe("bad-param");
    expect(e.message).toMatch(/slabs of whole m-blocks.*allReduceTilewise/);
    await expect(compile(arOp(tilewise(120, 64, 3), 120, 64, 64))).resolves.toBeDefined();
    const consumer = { ...arOp(tilewise(M, 64, 2), M, 64, 64), body: builtinBody("gemm_tma_persistent") };
    expect((await refusal(compile(consumer))).message).toMatch(/needs a producer body/);
  });

  it("every shape compiles both ways to a manifest that validates, its tables in range (property)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          world: fc.integer({ min: 2, max: 8 }),
          blocks: fc.integer({ min: 1, max: 3 }),
          extra: fc.integer({ min: 0, max: 40 }),
          n: fc.integer({ min: 1, max: 12 }),
          k: fc.integer({ min: 1, max: 8 }),
          split: fc.integer({ min: 1, max: 2 }),
          sm: fc.boolean(),
          bm: fc.constantFrom(16, 32),
          bn: fc.constantFrom(16, 32, 64),
        }),
        async ({ world, blocks, extra, n, k, split, sm, bm, bn }) => {
          const tile = { BM: bm, BN: bn, BK: 32 };
          const N = 8 * n;
          const K = 8 * k;
          // Partitioned: whole m-blocks per rank; tile-wise: any M.
          const Mp = world * blocks * bm * split;
          const p = await compile(arOp(partitioned(Mp, N, world, split), Mp, N, K, { backend: sm ? "sm" : "copy-engine" }, tile));
          expect(() => Manifest.parse(p.manifest)).not.toThrow();
          checkRanges(p.manifest);
          const Mt = world + extra;
          const t = await compile(arOp(tilewise(Mt, N, world, [bm, bn]), Mt, N, K, {}, tile));
          expect(() => Manifest.parse(t.manifest)).not.toThrow();
          checkRanges(t.manifest);
        },
      ),
      { numRuns: 30 },
    );
  });
});
