import { type ChunkPlan, allGatherRing, allGatherSwizzle, lowerToTileSchedule, planSignals } from "@ovl/chunk-plan";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { compile } from "../../../compile/compile.js";
import { tlxBackend } from "../../../compile/backends.js";
import { builtinBody, emitAgGemm, emitGemmArPartitioned, emitGemmRs } from "../../../index.js";
import { rsPlan } from "../../../examples/rs-plan.js";
import { codeOf } from "../../../testing/errors.js";
import { completes, nvshmemRows as rows, signalled, waited } from "../../../testing/nvshmem-rows.js";
import { checkNvshmemRows, nvshmemPushSource, nvshmemSlot } from "./index.js";

const TILE = { BM: 64, BN: 64, BK: 32 };

function gatherPlan(world: number, split: number, ring: boolean, M: number, K = 64): ChunkPlan {
  const o = { tensor: { name: "A", shape: [M, K], dtype: "bf16" as const }, axis: 0, mesh: [world], split, side: "push" as const };
  return planSignals(ring ? allGatherRing(o) : allGatherSwizzle(o));
}

function schedule(plan: ChunkPlan, tensor: string, role: "consumer" | "producer", M: number, N = 64, K = 64) {
  return lowerToTileSchedule(plan, { tensor, problem: { M, N, K }, tile: TILE, persistent: { numSms: 8 }, groupSizeM: 2 }, { role });
}

describe("the nvshmem-push kernel", () => {
  it("is the segment loop with ovl's bounded wait, then one NVSHMEM put with signal per row", async () => {
    await expect(nvshmemPushSource()).toMatchFileSnapshot("./__golden__/nvshmem_push.py");
    const src = nvshmemPushSource({ dtype: "fp32" });
    expect(src).toContain("from ovl_runtime.nvshmem import put_signal_add");
    expect(src).toContain("wait_slot(sig_ptr, wait_at.to(tl.int32), target, err_ptr, rank, timeout_ns)");
    // No peer-pointers table: NVSHMEM names the PE and the local symmetric address.
    expect(src).not.toContain("peer_base");
  });

  it("spreads slot s to the low half of the 64-bit signal word at int32 slot 2s", () => {
    expect([0, 1, 5].map(nvshmemSlot)).toEqual([0, 2, 10]);
    expect(codeOf(() => nvshmemSlot(-1))).toBe("bad-param");
    // length 4, signal at slot 2 of 4: fine; at an odd slot, past the end, or none: refused.
    expect(() => checkNvshmemRows([0, 1, 0, 4, -1, 0, 2], 4)).not.toThrow();
    expect(codeOf(() => checkNvshmemRows([0, 1, 0, 4, -1, 0, 1], 4))).toBe("bad-param");
    expect(codeOf(() => checkNvshmemRows([0, 1, 0, 4, -1, 0, 4], 4))).toBe("bad-param");
    expect(codeOf(() => checkNvshmemRows([0, 1, 0, 4, -1, 0, -1], 4))).toBe("bad-param");
    expect(() => checkNvshmemRows([0, 0, 0, 0, -1, 0, -1], 4)).not.toThrow(); // padding
  });
});

describe("the nvshmem transfer backend", () => {
  it("signals every chunk slot AllGather+GEMM waits on exactly once per launch, for any world, split and plan", () => {
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 6 }), fc.integer({ min: 1, max: 3 }), fc.boolean(), (world, split, ring) => {
        const M = 64 * world * split;
        const plan = gatherPlan(world, split, ring, M);
        const m = emitAgGemm(plan, schedule(plan, "A", "consumer", M), { backend: "nvshmem" }).manifest;
        // The consumer waits for arrivals 1 (epoch-target), once per slot of its table.
        expect(m.kernels[0]!.args.find((a) => a.name === "target")!.value).toEqual({ kind: "epoch-target", arrivals: 1 });
        expect(signalled(m)).toEqual(waited(m, "mblock_wait_slot"));
        expect(m.hostOps).toEqual([]);
        for (const rs of rows(m)) for (const r of rs) if (r.wait_at >= 0) expect(r.wait_at % 2).toBe(0); // a forward waits on a chunk
        // Rows in depth order: a ring's forwards never hold a program another rank's put needs.
        for (const programs of [1, 2, 3]) expect(completes(m, programs)).toBe(true);
      }),
      { numRuns: 24 },
    );
  });

  it("signals every partial slab m-block GEMM+RS reduces exactly once per launch, for any world and split", () => {
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 6 }), fc.integer({ min: 1, max: 3 }), (world, split) => {
        const M = 64 * world * split;
        const plan = rsPlan(world, M, 64, split);
        const m = emitGemmRs(plan, schedule(plan, "C_partial", "producer", M), { backend: "nvshmem" }).manifest;
        expect(signalled(m)).toEqual(waited(m, "rs_arrival_slot"));
        // The sources are symmetric (an NVSHMEM put reads the symmetric heap), the signal buffer int32.
        expect(m.buffers.find((b) => b.name === "C_partial")!.symmetric).toBe(true);
        expect(m.buffers.find((b) => b.name === "signals")!.dtype).toBe("int32");
        const push = m.kernels.find((k) => k.name === "nvshmem_push")!;
        expect(push.requires).toEqual(["nvshmem"]);
        // Each row waits on the tile-done slot of its m-block, after the spread arrival slots.
        for (const rs of rows(m)) for (const r of rs) if (r.length > 0) expect(r.wait_at).toBeGreaterThanOrEqual(2 * world * split);
      }),
      { numRuns: 24 },
    );
  });

  it("leaves the other backends' manifests as they were", () => {
    const plan = rsPlan(2, 256, 64, 2);
    const sched = schedule(plan, "C_partial", "producer", 256);
    for (const backend of ["copy-engine", "sm"] as const) {
      const m = emitGemmRs(plan, sched, { backend }).manifest;
      expect(m.kernels.some((k) => k.requires !== undefined)).toBe(false);
      expect(m.buffers.find((b) => b.name === "C_partial")!.symmetric).toBe(false);
    }
  });

  it("realises a pull as the holder's put, with the same signals as the push plan", () => {
    const o = { tensor: { name: "A", shape: [512, 64], dtype: "bf16" as const }, axis: 0, mesh: [4], split: 2 };
    const pull = planSignals(allGatherSwizzle({ ...o, side: "pull" }));
    const pushed = planSignals(allGatherSwizzle({ ...o, side: "push" }));
    const m = emitAgGemm(pull, schedule(pull, "A", "consumer", 512), { backend: "nvshmem" }).manifest;
    const p = emitAgGemm(pushed, schedule(pushed, "A", "consumer", 512), { backend: "nvshmem" }).manifest;
    expect(signalled(m)).toEqual(waited(m, "mblock_wait_slot"));
    // Rank r's rows put r's own shard (rows 128r .. 128r + 128) to its peers: what the swizzle's pushes do.
    const sorted = (x: typeof m) => rows(x).map((rs) => rs.map((r) => JSON.stringify(r)).sort());
    expect(sorted(m)).toEqual(sorted(p));
    rows(m).forEach((rs, rank) => {
      for (const r of rs) expect(Math.floor(r.src_offset / (128 * 64))).toBe(rank);
    });
  });

  it("refuses what it cannot realise, naming the nearest plan or backend", async () => {
    const rs = rsPlan(2, 256, 64, 1);
    // The partitioned GEMM+AllReduce puts every reduced slab to every peer: an AllGather half that does not is refused.
    expect(() => emitGemmArPartitioned(rs, schedule(rs, "C_partial", "producer", 256), [], { backend: "nvshmem" })).toThrow(
      /does not carry rank 0's whole slab .* over NVSHMEM puts/,
    );
    const op = {
      name: "ag",
      kind: "ag-gemm" as const,
      plan: gatherPlan(2, 1, false, 256),
      body: builtinBody("gemm_tma_persistent"),
      problem: { M: 256, N: 64, K: 64 },
      tile: TILE,
      options: { backend: "nvshmem" as const },
    };
    const compiled = await compile(op);
    expect(compiled.manifest.kernels.map((k) => k.template.kind)).toEqual(["local-consumer", "nvshmem-push"]);
    expect(compiled.manifest.kernels[0]!.grid).toEqual([{ kind: "num-sms", cap: 4, reserve: 16 }]);
    await expect(compile(op, tlxBackend())).rejects.toThrow(/TLX backend does not build the nvshmem/);
    await expect(compile({ ...op, kind: "ag-grouped-gemm" })).rejects.toThrow(
      /nvshmem transfer backend realises ag-gemm, gemm-rs and gemm-ar/,
    );
    await expect(compile({ ...op, rows: {} })).rejects.toThrow(/one row count/);
  });
});
