import { allGatherRing, allGatherSwizzle, type ChunkPlan, lowerToTileSchedule, planSignals } from "@ovl/chunk-plan";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type HostOp, Manifest } from "../../core/manifest/schema.js";
import { emitAgGemm, gemmLaunchDefaults, HOPPER_SHARED_BYTES } from "../../index.js";
import { codeOf } from "../../testing/errors.js";

const TILE = { BM: 64, BN: 64, BK: 32 };

function agPlan(
  kind: "swizzle-push" | "swizzle-pull" | "ring-push" | "ring-pull",
  world: number,
  M: number,
  K: number,
  split: number,
): ChunkPlan {
  const o = { tensor: { name: "A", shape: [M, K], dtype: "bf16" as const }, axis: 0, mesh: [world], split };
  const [algo, side] = kind.split("-") as ["swizzle" | "ring", "push" | "pull"];
  return planSignals(algo === "swizzle" ? allGatherSwizzle({ ...o, side }) : allGatherRing({ ...o, side }));
}

function schedule(plan: ChunkPlan, M: number, N: number, K: number, tile = TILE) {
  return lowerToTileSchedule(
    plan,
    { tensor: "A", problem: { M, N, K }, tile, persistent: { numSms: 8 }, groupSizeM: 2 },
    { role: "consumer" },
  );
}

/**
 * Runs the host ops on `world` copies of A (rank r starts with only its shard valid, each
 * element labelled by its global index), one stream at a time in order, and records for
 * every signal write the set of elements already written on the signalled rank.
 */
function runHostOps(m: Manifest, M: number, K: number) {
  const world = m.world;
  const rows = M / world;
  const A = Array.from({ length: world }, (_, r) =>
    Array.from({ length: M * K }, (_, i) => (Math.floor(i / K) >= r * rows && Math.floor(i / K) < (r + 1) * rows ? i : -1)),
  );
  const signalled = new Map<string, number>();
  // Streams only depend on each other through waits on slots; run them round-robin until done.
  const queues = m.hostOps.flatMap((h) => h.streams.map((s) => ({ rank: h.rank, ops: [...s.ops] as HostOp[] })));
  let progress = true;
  while (progress) {
    progress = false;
    for (const q of queues) {
      while (q.ops.length > 0) {
        const op = q.ops[0]!;
        if (op.kind === "wait") {
          // A wait names the rank whose slot it reads (a pull ring's peer), default its own.
          if (!signalled.has(`${op.rank ?? q.rank}:${op.slot}`)) break;
        } else {
          expect(op.src.length).toBe(op.dst.length);
          for (let i = 0; i < op.src.length; i++) {
            const v = A[op.src.rank]![op.src.offset + i]!;
            if (v < 0) throw new Error(`copy reads element ${op.src.offset + i}, which rank ${op.src.rank} does not hold yet`);
            A[op.dst.rank]![op.dst.offset + i] = v;
          }
          if (op.signal !== undefined) {
            const key = `${op.signal.rank}:${op.signal.slot}`;
            expect(signalled.has(key), `slot ${key} written twice`).toBe(false);
            signalled.set(key, 1);
            // What a waiter on this slot may read: the rows of every m-block waiting on it must be in place.
            const waitSlots = m.tables.find((t) => t.name === "mblock_wait_slot")!.values[op.signal.rank]!;
            waitSlots.forEach((s, mb) => {
              if (s !== op.signal!.slot) return;
              for (let i = mb * TILE.BM * K; i < Math.min(M, (mb + 1) * TILE.BM) * K; i++) {
                if (A[op.signal!.rank]![i] !== i)
                  throw new Error(`m-block ${mb} of rank ${op.signal!.rank} is signalled before it arrived`);
              }
            });
          }
        }
        q.ops.shift();
        progress = true;
      }
    }
  }
  expect(
    queues.every((q) => q.ops.length === 0),
    "a host stream waits forever",
  ).toBe(true);
  return { A, signalled };
}

describe("emitAgGemm", () => {
  it("host copies gather A on every rank, and each m-block's slot is written only after its rows", () => {
    fc.assert(
      fc.property(
        fc.constantFrom("swizzle-push", "swizzle-pull", "ring-push", "ring-pull") as fc.Arbitrary<
          "swizzle-push" | "swizzle-pull" | "ring-push" | "ring-pull"
        >,
        fc.integer({ min: 1, max: 4 }),
        fc.constantFrom(1, 2),
        fc.constantFrom(1, 2),
        (kind, world, split, blocksPerChunk) => {
          const M = world * split * blocksPerChunk * TILE.BM;
          const K = 8;
          const N = 64;
          const plan = agPlan(kind, world, M, K, split);
          const { manifest, files } = emitAgGemm(plan, schedule(plan, M, N, K));
          expect(Manifest.safeParse(manifest).success).toBe(true);
          const { A, signalled } = runHostOps(manifest, M, K);
          for (const a of A) expect(a).toEqual(Array.from({ length: M * K }, (_, i) => i));
          // Every slot a kernel waits on is written; local m-blocks (-1) are exactly the rank's own rows.
          const slots = manifest.tables.find((t) => t.name === "mblock_wait_slot")!.values;
          slots.forEach((row, r) =>
            row.forEach((s, mb) => {
              const local = Math.floor((mb * TILE.BM) / (M / world)) === r;
              expect(s < 0).toBe(local);
              if (s >= 0) expect(signalled.has(`${r}:${s}`)).toBe(true);
            }),
          );
          const order = manifest.tables.find((t) => t.name === "mblock_order")!.values;
          for (const o of order) expect([...o].sort((a, b) => a - b)).toEqual(Array.from({ length: M / TILE.BM }, (_, i) => i));
          expect(files.map((f) => f.path)).toEqual(["ag_gemm_consumer.py"]);
        },
      ),
      { numRuns: 25 },
    );
  });

  it("visits local m-blocks first, then chunks in arrival order", () => {
    const plan = agPlan("swizzle-push", 2, 256, 32, 2);
    const { manifest } = emitAgGemm(plan, schedule(plan, 256, 64, 32));
    expect(manifest.tables).toEqual([
      {
        name: "mblock_order",
        dtype: "int32",
        values: [
          [0, 1, 2, 3],
          [2, 3, 0, 1],
        ],
      },
      {
        name: "mblock_wait_slot",
        dtype: "int32",
        values: [
          [-1, -1, 0, 1],
          [0, 1, -1, -1],
        ],
      },
    ]);
    const k = manifest.kernels[0]!;
    expect(k.args.map((a) => a.name)).toEqual([
      "a_ptr",
      "b_ptr",
      "c_ptr",
      "order_ptr",
      "slot_ptr",
      "sig_ptr",
      "err_ptr",
      "M",
      "N",
      "K",
      "rank",
      "target",
      "timeout_ns",
    ]);
    expect(k.args.find((a) => a.name === "target")!.value).toEqual({ kind: "epoch-target", arrivals: 1 });
    expect(k.constexprs).toEqual({ BLOCK_M: 64, BLOCK_N: 64, BLOCK_K: 32, GROUP_M: 2 });
    expect(manifest.buffers.find((b) => b.name === "signals")).toEqual({
      name: "signals",
      shape: [2],
      dtype: "uint32",
      symmetric: true,
      init: "zeros",
    });
    expect(manifest.reference).toMatchObject({ operator: "ag-gemm", M: 256, N: 64, K: 32, rowsPerRank: 128, output: "gemm_c" });
  });

  it("refuses what the copy engine or the row-blocked kernel cannot do", () => {
    // A ring pull chains on a peer's slot: its host streams wait on the peer's slot by rank.
    const ringPull = agPlan("ring-pull", 3, 384, 32, 1);
    const waits = emitAgGemm(ringPull, schedule(ringPull, 384, 64, 32)).manifest.hostOps.flatMap((h) =>
      h.streams.flatMap((st) => st.ops.flatMap((o) => (o.kind === "wait" ? [[h.rank, o.rank]] : []))),
    );
    expect(waits.length).toBeGreaterThan(0);
    for (const [r, on] of waits) expect(on).toBe((r! + 2) % 3);
    // Chunks of 32 rows: one 64-row m-block spans two chunk slots.
    const fine = agPlan("swizzle-push", 2, 128, 32, 2);
    expect(codeOf(() => emitAgGemm(fine, schedule(fine, 128, 64, 32)))).toBe("bad-schedule");
    // A schedule of another plan, or of the wrong role.
    const plan = agPlan("swizzle-push", 2, 256, 32, 1);
    const other = agPlan("ring-push", 2, 256, 32, 1);
    expect(codeOf(() => emitAgGemm(plan, schedule(other, 256, 64, 32)))).toBe("bad-schedule");
    expect(codeOf(() => emitAgGemm(plan, schedule(plan, 256, 64, 32), { dtype: "fp16" }))).toBe("bad-plan");
    expect(codeOf(() => emitAgGemm(plan, schedule(plan, 256, 64, 32), { numStages: 0 }))).toBe("bad-param");
    expect(codeOf(() => emitAgGemm(plan, schedule(plan, 256, 64, 32), { name: "bad name" }))).toBe("bad-identifier");
    expect(codeOf(() => emitAgGemm(plan, schedule(plan, 256, 60, 32, { BM: 64, BN: 64, BK: 32 })))).toBe("bad-param");
  });
});

describe("gemmLaunchDefaults", () => {
  const t = (BLOCK_M: number, BLOCK_N: number, BLOCK_K = 64) => ({ BLOCK_M, BLOCK_N, BLOCK_K });
  it("takes the deepest ring that fits with the epilogue tile, and 8 warps from 128×256 up", () => {
    expect(gemmLaunchDefaults(t(128, 256))).toEqual({ numWarps: 8, numStages: 3 });
    expect(gemmLaunchDefaults(t(256, 128))).toEqual({ numWarps: 8, numStages: 3 });
    expect(gemmLaunchDefaults(t(128, 128))).toEqual({ numWarps: 4, numStages: 4 });
    expect(gemmLaunchDefaults(t(64, 256))).toEqual({ numWarps: 4, numStages: 4 });
    expect(gemmLaunchDefaults(t(256, 256))).toEqual({ numWarps: 8, numStages: 2 });
    expect(gemmLaunchDefaults(t(128, 128), "fp32")).toEqual({ numWarps: 4, numStages: 2 });
    expect(gemmLaunchDefaults(t(64, 64), "fp32")).toEqual({ numWarps: 4, numStages: 4 });
  });

  it("leaves the C tile out of shared memory for a body that stores from registers (the MoE bodies)", () => {
    expect(gemmLaunchDefaults(t(128, 256), "bf16", HOPPER_SHARED_BYTES, "registers")).toEqual({ numWarps: 8, numStages: 4 });
    expect(gemmLaunchDefaults(t(256, 256), "bf16", HOPPER_SHARED_BYTES, "registers")).toEqual({ numWarps: 8, numStages: 3 });
    expect(gemmLaunchDefaults(t(128, 256, 128), "bf16", HOPPER_SHARED_BYTES, "registers")).toEqual({ numWarps: 8, numStages: 2 });
  });

  it("never picks a ring that overflows shared memory when a shallower one fits", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(16, 32, 64, 128, 256),
        fc.constantFrom(16, 32, 64, 128, 256),
        fc.constantFrom(16, 32, 64, 128),
        (m, n, k) => {
          const { numStages } = gemmLaunchDefaults(t(m, n, k));
          const need = (s: number) => s * (m * k + k * n) * 2 + m * n * 2;
          if (numStages > 2) expect(need(numStages)).toBeLessThanOrEqual(HOPPER_SHARED_BYTES);
          if (numStages < 4) expect(need(numStages + 1)).toBeGreaterThan(HOPPER_SHARED_BYTES);
        },
      ),
    );
  });

  it("emitters use the tile's defaults unless warps or stages are given", () => {
    const plan = agPlan("swizzle-push", 2, 256, 64, 1);
    const k = (o = {}) => emitAgGemm(plan, schedule(plan, 256, 128, 64), o).manifest.kernels[0]!;
    expect([k().numWarps, k().numStages]).toEqual([4, 4]); // the test tile is below 128×256
    expect([k({ numWarps: 8 }).numWarps, k({ numWarps: 8 }).numStages]).toEqual([8, 4]);
    expect(k({ numStages: 2 }).numStages).toBe(2);
  });
});
