import { allGatherSwizzle, lowerToTileSchedule, planSignals, reduceScatterDirect, type ChunkPlan } from "@ovl/chunk-plan";
import { evaluateMap } from "@ovl/mapping";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { emitGemmRs } from "./template.js";
import { Manifest } from "../../core/manifest/schema.js";
import { parseWithPython } from "../../testing/python.js";
import { PythonWriter } from "../../core/writer/index.js";
import {
  builtinBody,
  compile,
  computeConfigs,
  COMPUTE_CONFIGS_SCHEMA,
  fastestBackend,
  parseComputeConfigs,
  resolveCompute,
  tlxBackend,
  type ComputeConfigTable,
  type OperatorInput,
} from "../../index.js";
import {
  emitTlxGemm,
  emitTlxGemmRs,
  EPILOGUE_BARRIER,
  groupedTiles,
  MAX_STORE_GROUPS,
  NOTIFY_PTX,
  PINGPONG_BARRIERS,
  producerTileNotifyComm,
  SM90_MAX_SHARED_BYTES,
  STORED_BARRIER,
  STORED_DEPTH,
  storedLag,
  tileNotifyComm,
  TMA_REDUCE_PTX,
  tmaTileNotifyComm,
  tlxGemm,
  tlxGemmPingPong,
  tlxKernel,
  tlxPingPongSharedBytes,
} from "../../index.js";
import { powerOfTwo } from "../../testing/arbitraries.js";
import { codeOf } from "../../testing/errors.js";
import { tableMap } from "../../testing/mblock-maps.js";
import { rsPlan } from "../../examples/rs-plan.js";

function rsSchedule(plan: ChunkPlan, M: number, N: number, K: number, tile = { BM: 128, BN: 128, BK: 64 }) {
  return lowerToTileSchedule(
    plan,
    { tensor: "C_partial", problem: { M, N, K }, tile, persistent: { numSms: 8 }, groupSizeM: 2 },
    { role: "producer" },
  );
}

/** A split-1 swizzled AllGather of A [M, K] over `world` ranks. */
function agPlanOf(world: number, M: number, K: number): ChunkPlan {
  return planSignals(
    allGatherSwizzle({ tensor: { name: "A", shape: [M, K], dtype: "bf16" }, axis: 0, mesh: [world], split: 1, side: "push" }),
  );
}

/** The consumer task of a TLX module: from its `replicate=` line to the end. */
function consumerTask(src: string): string {
  return src.slice(src.indexOf("replicate="));
}

describe("ping-pong consumers", () => {
  it("take whole tiles in turn, handing the tensor cores over through two named barriers", () => {
    const src = emitTlxGemm({ M: 512, N: 384, K: 256 }, { BM: 128, BN: 128, BK: 64 }, { consumerSchedule: "pingpong", stages: 4 }).files[0]!
      .text;
    const c = consumerTask(src);
    const [first, second] = PINGPONG_BARRIERS;
    // Consumer 1 lets consumer 0 start, then each waits on its own barrier and arrives on the other's.
    expect(c.indexOf(`tlx.named_barrier_arrive(${first}, 256)`)).toBeLessThan(c.indexOf("for tile_id in range"));
    expect(c).toContain(`tlx.named_barrier_wait(${first} + cid, 256)`);
    expect(c).toContain(`tlx.named_barrier_arrive(${second} - cid, 256)`);
    // The hand-over comes after the last wgmma is issued and before the epilogue.
    expect(c.indexOf(`named_barrier_arrive(${second} - cid`)).toBeLessThan(c.indexOf("c_desc.store"));
    expect(c.indexOf(`named_barrier_arrive(${second} - cid`)).toBeGreaterThan(c.lastIndexOf("tlx.async_dot("));
    // The other consumer's tiles advance the ring position by their k-steps.
    expect(c).toContain("it += k_tiles");
    expect(c).toContain("turn ^= 1");
    // One A block of the whole tile per stage, one empty arrival per stage.
    expect(src).toContain("empty_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)");
    expect(src.match(/async_descriptor_load\(a_desc/g)).toHaveLength(1);
    expect(parseWithPython({ k: src }).k).toBe("ok");
  });

  it("store one or two column slices in the epilogue", () => {
    const text = (epilogueSplit: number) =>
      emitTlxGemm({ M: 512, N: 384, K: 256 }, { BM: 128, BN: 128, BK: 64 }, { consumerSchedule: "pingpong", epilogueSplit }).files[0]!.text;
    expect(text(1).match(/c_desc\.store\(/g)).toHaveLength(1);
    expect(text(2).match(/c_desc\.store\(/g)).toHaveLength(2);
    expect(text(2)).toContain("c_desc.store([offs_am, offs_bn + EPI_N], acc1.to(tl.bfloat16))");
  });

  it("refuse accumulators over 128 registers, bad epilogue splits and rings beyond shared memory", () => {
    expect(codeOf(() => tlxGemmPingPong({ BLOCK_M: 128, BLOCK_N: 256, BLOCK_K: 64 }))).toBe("bad-param");
    expect(codeOf(() => tlxGemmPingPong({ BLOCK_M: 128, BLOCK_N: 128, BLOCK_K: 64, epilogueSplit: 3 }))).toBe("bad-param");
    expect(codeOf(() => tlxGemmPingPong({ BLOCK_M: 128, BLOCK_N: 128, BLOCK_K: 64, stages: 7 }))).toBe("bad-param");
    expect(
      codeOf(() => emitTlxGemm({ M: 512, N: 384, K: 256 }, { BM: 128, BN: 128, BK: 64 }, { consumerSchedule: "pingpong", consumers: 3 })),
    ).toBe("bad-param");
    expect(codeOf(() => emitTlxGemm({ M: 512, N: 384, K: 256 }, undefined, { epilogueSplit: 3 }))).toBe("bad-param");
    expect(codeOf(() => emitTlxGemm({ M: 512, N: 384, K: 256 }, undefined, { target: "sm_100a", consumerSchedule: "pingpong" }))).toBe(
      "bad-param",
    );
  });

  it("property: a tiling is refused exactly when its ring and staging slices exceed shared memory", () => {
    fc.assert(
      fc.property(
        fc.record({
          BM: powerOfTwo(64, 128),
          BN: powerOfTwo(16, 128),
          BK: powerOfTwo(16, 128),
          stages: fc.integer({ min: 1, max: 10 }),
          split: fc.constantFrom(1, 2),
        }),
        ({ BM, BN, BK, stages, split }) => {
          const p = { BLOCK_M: BM, BLOCK_N: BN, BLOCK_K: BK, stages, epilogueSplit: split };
          const fits = tlxPingPongSharedBytes(p) <= SM90_MAX_SHARED_BYTES;
          expect(codeOf(() => tlxGemmPingPong(p))).toBe(fits ? undefined : "bad-param");
          if (fits) expect(tlxGemmPingPong(p).accumulatorRegisters).toBe((BM * BN) / 128);
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe("tile-done notifies (GEMM+RS producer)", () => {
  it("are deferred by one tile: the previous tile's slot after this tile's stores, the last one after the loop; the last two tiles at once", () => {
    for (const [consumerSchedule, epilogueSplit, pending, barrier, threads, leader] of [
      ["cooperative", undefined, 2, `${EPILOGUE_BARRIER}`, 256, "cid == 0"],
      ["cooperative", 1, 1, `${EPILOGUE_BARRIER}`, 256, "cid == 0"],
      ["pingpong", 2, 2, `${EPILOGUE_BARRIER} + cid`, 128, "True"],
      ["pingpong", 1, 1, `${EPILOGUE_BARRIER} + cid`, 128, "True"],
    ] as const) {
      const plan = rsPlan(2, 512, 256, 2);
      const tile = consumerSchedule === "pingpong" ? { BM: 128, BN: 128, BK: 64 } : { BM: 128, BN: 256, BK: 64 };
      const r = emitTlxGemmRs(plan, rsSchedule(plan, 512, 256, 128, tile), {
        consumerSchedule,
        ...(epilogueSplit === undefined ? {} : { epilogueSplit }),
      });
      const c = consumerTask(r.files[0]!.text);
      const inLoop = `tile_notify(sig_ptr, pending_slot, ${barrier}, ${threads}, ${leader}, "sys", ${pending})`;
      const atExit = `tile_notify(sig_ptr, pending_slot, ${barrier}, ${threads}, ${leader}, "sys", 0)`;
      expect(c.indexOf("pending_slot = -1")).toBeLessThan(c.indexOf("for tile_id"));
      expect(c.indexOf(inLoop)).toBeGreaterThan(c.lastIndexOf("c_desc.store"));
      // The tile's slot: its chunk's, one expression over the m-block on every rank (no table load).
      expect(c.indexOf("ovl_m = pid_m\n")).toBeGreaterThan(c.indexOf(inLoop));
      expect(c.indexOf("pending_slot = ovl_m + 6")).toBeGreaterThan(c.indexOf("ovl_m = pid_m\n"));
      expect(c.lastIndexOf(atExit)).toBeGreaterThan(c.indexOf("pending_slot = tl.load"));
      // At the program's last two tiles the tile's own slot right after its stores, so the last two waves' chunks are not both held to the end.
      const flush = c.indexOf("if tile_id + 2 * tl.num_programs(0) >= num_tiles:");
      expect(flush).toBeGreaterThan(c.indexOf("pending_slot = ovl_m + 6"));
      expect(c.indexOf(atExit, flush)).toBeGreaterThan(flush);
      expect(c.indexOf("pending_slot = -1", flush)).toBeGreaterThan(c.indexOf(atExit, flush));
      expect(c.match(/tile_notify\(/g)).toHaveLength(3);
      expect(r.expect.tlx_gemm_rs).toContain(NOTIFY_PTX);
      expect(parseWithPython({ k: r.files[0]!.text }).k).toBe("ok");
    }
  });

  it("write the library's wait for bulk stores, the named barrier and one release add from the leader", () => {
    const k = tlxKernel({
      kind: "k",
      entry: "k",
      summary: "s",
      compute: tlxGemm({ BLOCK_M: 128, BLOCK_N: 128, BLOCK_K: 64 }),
      comm: tileNotifyComm(tableMap("mblock_notify_slot"), "gpu"),
      schedule: groupedTiles({ groupM: 4, order: tableMap("mblock_order") }),
    });
    const lib = k.source.slice(k.source.indexOf("def tile_notify"), k.source.indexOf("@triton.jit\ndef k("));
    expect(lib).toContain("cp.async.bulk.wait_group 0; mov.b32 $0, 0;");
    expect(lib).toContain("cp.async.bulk.wait_group 2; mov.b32 $0, 0;");
    expect(lib.indexOf("tlx.named_barrier_wait(BAR_ID, BAR_THREADS)")).toBeLessThan(lib.indexOf("tl.atomic_add"));
    expect(lib).toContain('tl.atomic_add(sig_ptr + slot, 1, sem="release", scope=SCOPE)');
    // Two column slices a tile (the default split): the previous tile's slot once all but this tile's two store groups are done.
    expect(k.source).toContain('"gpu", 2)');
    expect(k.info.args).toEqual(["a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "mblock_notify_slot", "sig_ptr", "mblock_order"]);
    expect(k.source).toContain("pending_slot = tl.load(mblock_notify_slot + (ovl_m))");
    expect(k.source).toContain("next_pid_m = tl.load(mblock_order + ahead_first + (ahead % ahead_size), mask=ahead < num_tiles, other=0)");
    expect(codeOf(() => tileNotifyComm(tableMap("mblock_notify_slot"), "cta" as "gpu"))).toBe("bad-param");
    const tooMany = tileNotifyComm(tableMap("mblock_notify_slot"));
    expect(
      codeOf(() =>
        tooMany.writeAfterStores?.(new PythonWriter(), { barrier: "11", threads: 128, leader: "True", storeGroups: MAX_STORE_GROUPS + 1 }),
      ),
    ).toBe("bad-param");
  });

  it("from the producer: consumers arrive on a ring of mbarriers once a tile's stores are complete, the producer notifies lag tiles later", () => {
    for (const [consumerSchedule, storers, pending, sync] of [
      ["cooperative", 2, 2, `${STORED_BARRIER} + cid`],
      ["pingpong", 1, 2, `${EPILOGUE_BARRIER} + cid`],
    ] as const) {
      const plan = rsPlan(2, 512, 256, 2);
      const tile = consumerSchedule === "pingpong" ? { BM: 128, BN: 128, BK: 64 } : { BM: 128, BN: 256, BK: 64 };
      const r = emitTlxGemmRs(plan, rsSchedule(plan, 512, 256, 128, tile), { consumerSchedule, notifier: "producer" });
      const src = r.files[0]!.text;
      const lag = storedLag(consumerSchedule);
      expect(src).toContain(`stored_bars = tlx.alloc_barriers(num_barriers=${STORED_DEPTH}, arrive_count=${storers})`);
      const producer = src.slice(src.indexOf('async_task("default")'), src.indexOf("replicate="));
      const c = consumerTask(src);
      // No consumer releases anything; the producer's adds follow its tile's loads and, after its loop, the tiles it owes.
      expect(c).not.toContain("tl.atomic_add");
      expect(c).not.toContain("tile_notify(");
      expect(producer.indexOf(`done_tile = own_tile - ${lag}`)).toBeGreaterThan(producer.indexOf("tlx.async_descriptor_load"));
      expect(producer.match(/tl\.atomic_add\(sig_ptr \+ stored_slot_\d, 1, sem="release", scope="sys"\)/g)).toHaveLength(lag + 1);
      expect(producer).toContain(
        `tlx.barrier_wait(tlx.local_view(stored_bars, done_tile % ${STORED_DEPTH}), (done_tile // ${STORED_DEPTH}) & 1)`,
      );
      expect(producer.indexOf(`stored_slot_${lag} = stored_slot_${lag - 1}`)).toBeGreaterThan(
        producer.indexOf(`done_tile = own_tile - ${lag}`),
      );
      // A consumer arrives for its previous tile once all but this tile's store groups are complete and its warp group got there.
      const wait = c.indexOf(`cp.async.bulk.wait_group ${pending}; mov.b32`);
      expect(wait).toBeGreaterThan(c.lastIndexOf("c_desc.store"));
      expect(c.indexOf(`tlx.named_barrier_wait(${sync}, 128)`)).toBeGreaterThan(wait);
      expect(c.indexOf(`tlx.barrier_arrive(tlx.local_view(stored_bars, stored_tile % ${STORED_DEPTH}))`)).toBeGreaterThan(wait);
      expect(c.lastIndexOf("cp.async.bulk.wait_group 0; mov.b32")).toBeGreaterThan(c.indexOf("stored_tile = (tile_id"));
      expect(r.manifest.kernels[0]!.template.params).toMatchObject({ notifier: "producer", consumerSchedule });
      expect(r.expect.tlx_gemm_rs).toContain(NOTIFY_PTX);
      expect(parseWithPython({ k: src }).k).toBe("ok");
    }
    // Two tiles per release: the producer releases every second tile for the last two, and owes fewer after its loop.
    const batched = tlxKernel({
      kind: "k",
      entry: "k",
      summary: "s",
      compute: tlxGemm({ BLOCK_M: 128, BLOCK_N: 256, BLOCK_K: 64 }),
      comm: producerTileNotifyComm(tableMap("mblock_notify_slot"), "gpu", 3, 2),
      schedule: groupedTiles({ groupM: 4, order: tableMap("mblock_order") }),
    }).source;
    expect(batched).toContain("if (own_tile + 1) % 2 == 0:");
    expect(batched).toContain("stored_slot_4 = stored_slot_3");
    expect(batched).toContain("owed_from = (own_tiles // 2) * 2 - 3");
    expect(batched.match(/tl\.atomic_add\(sig_ptr \+ stored_slot_\d, 1, sem="release", scope="gpu"\)/g)).toHaveLength(2 + 4);
    expect(parseWithPython({ k: batched }).k).toBe("ok");
    expect(codeOf(() => producerTileNotifyComm(tableMap("mblock_notify_slot"), "sys", 3, 0))).toBe("bad-param");
    expect(codeOf(() => producerTileNotifyComm(tableMap("mblock_notify_slot"), "sys", 6, 2))).toBe("bad-param");
    expect(codeOf(() => producerTileNotifyComm(tableMap("mblock_notify_slot"), "sys", 0))).toBe("bad-param");
    expect(codeOf(() => producerTileNotifyComm(tableMap("mblock_notify_slot"), "sys", STORED_DEPTH - 1))).toBe("bad-param");
    expect(codeOf(() => producerTileNotifyComm(tableMap("mblock_notify_slot"), "cta" as "gpu"))).toBe("bad-param");
    expect(codeOf(() => emitTlxGemm({ M: 512, N: 256, K: 128 }, undefined, { notifier: "producer" }))).toBe("bad-param");
    const plan = rsPlan(2, 512, 256, 2);
    expect(
      codeOf(() => emitTlxGemmRs(plan, rsSchedule(plan, 512, 256, 128, { BM: 128, BN: 256, BK: 64 }), { notifier: "both" as "producer" })),
    ).toBe("bad-param");
  });

  it("by TMA reduce-add: the leader adds the previous tile's slot once both warp groups' stores are written; no fence anywhere", () => {
    for (const [epilogueSplit, pending] of [
      [2, 2],
      [4, 4],
    ] as const) {
      const plan = rsPlan(2, 512, 256, 2);
      const r = emitTlxGemmRs(plan, rsSchedule(plan, 512, 256, 128, { BM: 128, BN: 256, BK: 64 }), { notifier: "tma", epilogueSplit });
      const src = r.files[0]!.text;
      const c = consumerTask(src);
      const producer = src.slice(src.indexOf('async_task("default")'), src.indexOf("replicate="));
      expect(src).not.toContain("tl.atomic_add");
      expect(producer).not.toContain("sig_ptr");
      // The descriptor spans the slots the tables name (the highest + 1); its sources are four one-hot rows.
      const notify = r.manifest.kernels[0]!.tileProgram!.slots[0]!;
      const slots = 1 + Math.max(...[0, 1].flatMap((rank) => [0, 1, 2, 3].map((m) => evaluateMap(notify, { ovl_m: m, ovl_rank: rank }))));
      expect(r.manifest.kernels[0]!.constexprs).toMatchObject({ NUM_SLOTS: slots, EPILOGUE_SPLIT: epilogueSplit });
      expect(c).toContain("sig_desc = tl.make_tensor_descriptor(sig_ptr, shape=[NUM_SLOTS], strides=[1], block_shape=[4])");
      expect(src).toContain("notify_rows = tlx.local_view(tlx.local_alloc((128,), tl.int32, 1), 0)");
      expect(src).toContain("def tile_reduce_notify(sig_desc, rows, slot)");
      expect(src.match(/tlx\.local_slice\(rows, \[(\d+)\], \[4\]\)/g)).toHaveLength(4);
      // After the stores: the previous tile's groups complete, both warp groups there, then the leader's reduce.
      const wait = c.indexOf(`cp.async.bulk.wait_group ${pending}; mov.b32`);
      expect(wait).toBeGreaterThan(c.lastIndexOf(epilogueSplit === 4 ? "tlx.async_descriptor_store(c_desc" : "c_desc.store"));
      const bar = c.indexOf(`tlx.named_barrier_wait(${EPILOGUE_BARRIER}, 256)`);
      expect(bar).toBeGreaterThan(wait);
      expect(c.indexOf("tile_reduce_notify(sig_desc, notify_rows, pending_slot)")).toBeGreaterThan(bar);
      // The program's last two tiles: every store written, then this tile's own reduce.
      const flush = c.indexOf("if tile_id + 2 * tl.num_programs(0) >= num_tiles:");
      expect(flush).toBeGreaterThan(c.indexOf("pending_slot = ovl_m + 6"));
      expect(c.indexOf("cp.async.bulk.wait_group 0; mov.b32", flush)).toBeGreaterThan(flush);
      expect(c.indexOf("tile_reduce_notify(", flush)).toBeGreaterThan(c.indexOf("cp.async.bulk.wait_group 0; mov.b32", flush));
      expect(c.indexOf("pending_slot = -1", flush)).toBeGreaterThan(c.indexOf("tile_reduce_notify(", flush));
      expect(c.match(/tile_reduce_notify\(/g)).toHaveLength(3);
      expect(c).toContain("if cid == 0:");
      // After the loop: every store written, the last slot, and the reduce out of shared memory before exit.
      expect(c.lastIndexOf("cp.async.bulk.wait_group 0; mov.b32")).toBeGreaterThan(c.indexOf("pending_slot = ovl_m + 6"));
      expect(c.lastIndexOf("tlx.async_descriptor_store_wait(0)")).toBeGreaterThan(c.lastIndexOf("tile_reduce_notify("));
      expect(r.manifest.kernels[0]!.template.params).toMatchObject({ notifier: "tma" });
      expect(r.expect.tlx_gemm_rs).toContain(TMA_REDUCE_PTX);
      expect(r.expect.tlx_gemm_rs).not.toContain(NOTIFY_PTX);
      expect(parseWithPython({ k: src }).k).toBe("ok");
    }
    expect(codeOf(() => tmaTileNotifyComm(tableMap("mblock_notify_slot"), 0))).toBe("bad-param");
    expect(
      codeOf(() =>
        tmaTileNotifyComm(tableMap("mblock_notify_slot"), 8).writeAfterStores?.(new PythonWriter(), {
          barrier: "11",
          threads: 256,
          leader: "cid == 0",
          storeGroups: 5,
        }),
      ),
    ).toBe("bad-param");
  });

  it("property: the TLX GEMM+RS has the template producer's order and notify tables, deliveries and reduction", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(2, 4),
        fc.constantFrom(1, 2),
        fc.constantFrom("copy-engine", "sm") as fc.Arbitrary<"copy-engine" | "sm">,
        fc.constantFrom("cooperative", "pingpong") as fc.Arbitrary<"cooperative" | "pingpong">,
        (world, split, backend, consumerSchedule) => {
          const M = 256 * world * split;
          const plan = rsPlan(world, M, 256, split);
          const tile = consumerSchedule === "pingpong" ? { BM: 128, BN: 128, BK: 64 } : { BM: 128, BN: 256, BK: 64 };
          const sched = rsSchedule(plan, M, 256, 128, tile);
          const opts = { backend, ...(backend === "sm" ? { commSms: 4 } : {}) } as const;
          const tlx = emitTlxGemmRs(plan, sched, { ...opts, consumerSchedule }).manifest;
          const template = emitGemmRs(plan, sched, opts).manifest;
          expect(Manifest.safeParse(tlx).success).toBe(true);
          const kinds = (m: typeof tlx) => m.kernels.map((k) => k.template.kind);
          expect(kinds(tlx)).toEqual(kinds(template).map((k) => (k === "gemm-producer" ? "tlx-gemm-rs" : k)));
          // The template producer's order and notify tables, now maps of the tile program (inline
          // here: a rank-rotated order, a chunk's slot), evaluate to the same values on every rank.
          const program = tlx.kernels[0]!.tileProgram!;
          const byName = (n: string) => template.tables.find((t) => t.name === n)!.values;
          for (let rank = 0; rank < world; rank++) {
            const own = Object.fromEntries(tlx.tables.map((t) => [t.name, t.values[rank]!]));
            byName("mblock_order")[rank]!.forEach((m, v) => expect(evaluateMap(program.order, { ovl_m: v, ovl_rank: rank }, own)).toBe(m));
            byName("mblock_notify_slot")[rank]!.forEach((slot, m) =>
              expect(evaluateMap(program.slots[0]!, { ovl_m: m, ovl_rank: rank }, own)).toBe(slot),
            );
          }
          expect(tlx.tables).toEqual(template.tables.filter((t) => !t.name.startsWith("mblock_")));
          expect(tlx.hostOps).toEqual(template.hostOps);
          expect(tlx.signals).toEqual(template.signals);
          const producer = tlx.kernels[0]!;
          expect(producer.precompiled?.target).toBe("sm_90a");
          expect(producer.grid).toEqual(template.kernels[0]!.grid);
        },
      ),
      { numRuns: 16 },
    );
  });
});

describe("the TLX backend", () => {
  const rsOp = (name: string, body = builtinBody("gemm_producer")): OperatorInput => ({
    name,
    kind: "gemm-rs",
    plan: rsPlan(2, 8192, 4096, 1),
    body,
    problem: { M: 8192, N: 4096, K: 1376 },
  });
  const table: ComputeConfigTable = parseComputeConfigs({
    $schema: COMPUTE_CONFIGS_SCHEMA,
    target: "h100",
    device: "test",
    measured: "2026-11-26",
    source: "test",
    entries: [
      {
        op: "gemm-rs",
        M: 8192,
        N: 4096,
        K: 1376,
        dtype: "bf16",
        body: "gemm_producer_tma_flat",
        BM: 128,
        BN: 256,
        BK: 64,
        groupM: 4,
        numStages: 3,
        numWarps: 8,
        ms: 0.15,
        tlx: { consumerSchedule: "pingpong", BM: 128, BN: 128, BK: 64, groupM: 8, stages: 6, epilogueSplit: 2, ms: 0.14 },
      },
      {
        op: "ag-gemm",
        M: 8192,
        N: 1376,
        K: 4096,
        dtype: "bf16",
        body: "gemm_tma_persistent",
        BM: 128,
        BN: 256,
        BK: 64,
        groupM: 8,
        numStages: 3,
        numWarps: 8,
      },
    ],
  });

  it("takes the table's TLX configuration (tile, grouping, consumers, ring) and keeps the body", () => {
    const { op, choice } = resolveCompute(rsOp("rs"), { table, backend: "tlx" });
    expect(choice.source).toBe("table");
    expect(op.tile).toEqual({ BM: 128, BN: 128, BK: 64 });
    expect(op.groupM).toBe(8);
    expect(op.warpSpecialization).toEqual({ consumerSchedule: "pingpong", stages: 6, epilogueSplit: 2 });
    expect(op.body.path).toBe("gemm_producer.py");
    // The Triton backend reads the same entry's own configuration.
    expect(resolveCompute(rsOp("rs"), { table }).op.tile).toEqual({ BM: 128, BN: 256, BK: 64 });
    const ag: OperatorInput = {
      ...rsOp("ag"),
      kind: "ag-gemm",
      body: builtinBody("gemm_tma_persistent"),
      problem: { M: 8192, N: 1376, K: 4096 },
    };
    const fallback = resolveCompute(
      {
        ...ag,
        plan: planSignals(
          reduceScatterDirect({
            tensor: { name: "C", shape: [8192, 1376], dtype: "bf16" },
            src: "C_partial",
            axis: 0,
            mesh: [2],
            split: 1,
            afterCompute: true,
          }),
        ),
      },
      { table, backend: "tlx" },
    );
    expect(fallback.choice).toMatchObject({ source: "default", reason: expect.stringMatching(/no TLX configuration/) });
  });

  it("compiles GEMM+RS into the TLX producer, the deliveries and the reduction", async () => {
    const op = {
      ...rsOp("rs"),
      tile: { BM: 128, BN: 128, BK: 64 },
      warpSpecialization: { consumerSchedule: "pingpong" as const, stages: 5 },
    };
    const r = await compile(op, tlxBackend());
    expect(r.manifest.kernels.map((k) => k.template.kind)).toEqual(["tlx-gemm-rs", "rs-reduce"]);
    expect(r.expect?.tlx_gemm_rs).toContain(NOTIFY_PTX);
    expect(r.files[0]!.text).toContain("NUM_STAGES: tl.constexpr");
    expect(r.manifest.kernels[0]!.constexprs).toMatchObject({ NUM_STAGES: 5, BLOCK_N: 128, EPILOGUE_SPLIT: 2 });
  });

  it("takes a table entry's notifier (the producer warp group) and refuses one on AllGather+GEMM", async () => {
    const pn = parseComputeConfigs({
      ...table,
      entries: table.entries.map((e) =>
        e.op === "gemm-rs"
          ? {
              ...e,
              tlx: { consumerSchedule: "cooperative", BM: 128, BN: 256, BK: 64, groupM: 8, stages: 3, notifier: "producer", ms: 0.14 },
            }
          : e,
      ),
    });
    const { op } = resolveCompute(rsOp("rs"), { table: pn, backend: "tlx" });
    expect(op.warpSpecialization).toEqual({ consumerSchedule: "cooperative", stages: 3, notifier: "producer" });
    const r = await compile(op, tlxBackend());
    expect(r.files[0]!.text).toContain("stored_bars = tlx.alloc_barriers");
    const ag: OperatorInput = {
      ...rsOp("ag"),
      kind: "ag-gemm",
      plan: agPlanOf(2, 8192, 4096),
      body: builtinBody("gemm_tma_persistent"),
      problem: { M: 8192, N: 1376, K: 4096 },
      tile: { BM: 128, BN: 256, BK: 64 },
      warpSpecialization: { consumerSchedule: "cooperative", stages: 3, notifier: "producer" },
    };
    await expect(compile(ag, tlxBackend())).rejects.toThrow(/notifier applies to gemm-rs/);
  });

  it("refuses a user's body, other operators and the AllGather transport option on GEMM+RS", async () => {
    const mine = { ...builtinBody("gemm_producer"), path: "mine.py", source: `${builtinBody("gemm_producer").source}\n# mine\n` };
    await expect(compile({ ...rsOp("rs", mine), tile: { BM: 128, BN: 128, BK: 64 } }, tlxBackend())).rejects.toThrow(
      /cannot transform mine.py/,
    );
    await expect(compile({ ...rsOp("rs"), tile: { BM: 128, BN: 128, BK: 64 } }, tlxBackend({ comm: "comm-task" }))).rejects.toThrow(
      /transport; GEMM\+ReduceScatter takes options.backend/,
    );
  });

  it("fastestBackend compiles with TLX exactly where the table measured it faster, Triton elsewhere and for GEMM+RS over SM pushes", async () => {
    const table = computeConfigs("h200")!;
    let tlxWins = 0;
    for (const e of table.entries.filter((x) => x.op === "gemm-rs")) {
      const op: OperatorInput = {
        name: "rs",
        kind: "gemm-rs",
        plan: rsPlan(2, e.M, e.N, 1),
        body: builtinBody("gemm_producer"),
        problem: e,
      };
      const r = await compile(op, fastestBackend(), { target: "h200" });
      const wins = e.tlx?.ms !== undefined && e.ms !== undefined && e.tlx.ms < e.ms;
      tlxWins += wins ? 1 : 0;
      expect(r.manifest.kernels[0]!.template.kind).toBe(wins ? "tlx-gemm-rs" : "local-producer");
      if (wins)
        expect(r.manifest.kernels[0]!.constexprs).toMatchObject({ BLOCK_M: e.tlx!.BM, BLOCK_N: e.tlx!.BN, NUM_STAGES: e.tlx!.stages });
      // An explicit tile keeps the operator as written, on Triton.
      const pinned = await compile({ ...op, tile: { BM: 128, BN: 128, BK: 64 } }, fastestBackend(), { target: "h200" });
      expect(pinned.manifest.kernels[0]!.template.kind).toBe("local-producer");
      // Beside the SM push kernel the Triton operator ran faster end to end at every shape: Triton.
      const pushed = await compile({ ...op, options: { backend: "sm" } }, fastestBackend(), { target: "h200" });
      expect(pushed.manifest.kernels[0]!.template.kind).toBe("local-producer");
    }
    expect(tlxWins).toBeGreaterThan(0);
  }, 60_000);
});
