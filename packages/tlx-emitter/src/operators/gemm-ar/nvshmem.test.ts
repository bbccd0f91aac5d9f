import { allReducePartitioned, allReduceTilewise, planSignals } from "@ovl/chunk-plan";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { nvshmemSlot } from "../../backends/triton/kernels/index.js";
import type { Manifest } from "../../core/manifest/schema.js";
import { EmitError } from "../../core/writer/index.js";
import { builtinBody, compile, type Operator } from "../../index.js";
import { nvshmemRows, signalled, waited } from "../../testing/nvshmem-rows.js";
import { AR_NVSHMEM_PUSH } from "./partitioned.js";

const TILE = { BM: 32, BN: 32, BK: 32 };
const C = (M: number, N: number, world: number) => ({
  tensor: { name: "C", shape: [M, N], dtype: "bf16" as const },
  src: "C_partial",
  mesh: [world],
});

function op(M: number, N: number, world: number, split: number, tilewise = false): Operator {
  const plan = planSignals(
    tilewise
      ? allReduceTilewise({ ...C(M, N, world), tile: [TILE.BM, TILE.BN] })
      : allReducePartitioned({ ...C(M, N, world), axis: 0, split, reduceScatter: "direct", allGather: "swizzle", afterCompute: true }),
  );
  return {
    name: "gemm_ar",
    kind: "gemm-ar",
    plan,
    body: builtinBody("gemm_producer"),
    problem: { M, N, K: 64 },
    tile: TILE,
    groupM: 2,
    options: { backend: "nvshmem" },
  };
}

/** What `ar_done` waits for per launch, by `rank:slot` (its `slot-wait` rows `[slot, arrivals]`). */
function doneWaits(m: Manifest): Map<string, number> {
  const out = new Map<string, number>();
  m.tables
    .find((t) => t.name === "ar_done_slots")!
    .values.forEach((flat, rank) => {
      for (let i = 0; i < flat.length; i += 2) if (flat[i]! >= 0) out.set(`${rank}:${flat[i]}`, flat[i + 1]!);
    });
  return out;
}

describe("GEMM+AllReduce over the nvshmem backend (partitioned)", () => {
  it("emits the slab pushes, ar-reduce, the puts of the reduced slabs and ar_done, with no peer pointers and no host ops", async () => {
    const { manifest: m, files } = await compile(op(256, 64, 2, 2));
    expect(m.kernels.map((k) => `${k.name}:${k.template.kind}:${k.stream}`)).toEqual([
      "gemm_ar_producer:local-producer:compute",
      "nvshmem_push:nvshmem-push:comm",
      `${AR_NVSHMEM_PUSH.name}:nvshmem-push:comm`,
      "ar_reduce:ar-reduce:compute",
      "ar_done:slot-wait:compute",
    ]);
    expect(m.kernels.filter((k) => k.requires?.includes("nvshmem")).map((k) => k.name)).toEqual(["nvshmem_push", AR_NVSHMEM_PUSH.name]);
    for (const k of m.kernels) for (const a of k.args) expect(a.value.kind).not.toBe("peer-pointers");
    expect(m.hostOps.every((h) => h.streams.every((s) => s.ops.length === 0))).toBe(true);
    // Puts read from the symmetric heap and land in the peers' symmetric ar_out.
    const push = m.kernels.find((k) => k.name === AR_NVSHMEM_PUSH.name)!;
    const arg = (name: string) => push.args.find((a) => a.name === name)?.value;
    expect(arg("src_ptr")).toEqual({ kind: "buffer", name: "ar_out" });
    expect(arg("dst_ptr")).toEqual({ kind: "buffer", name: "ar_out" });
    expect(m.buffers.find((b) => b.name === "ar_out")!.symmetric).toBe(true);
    expect(files.map((f) => f.path)).toContain(`${AR_NVSHMEM_PUSH.name}.py`);
  });

  it("signals every slot its waits count exactly as often per launch, for any world and split", async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 2, max: 5 }), fc.integer({ min: 1, max: 2 }), async (world, split) => {
        const M = world * 64;
        const N = 64;
        const m = (await compile(op(M, N, world, split))).manifest;
        // The slab pushes: every arrival ar-reduce waits on, once.
        expect(signalled(m)).toEqual(waited(m, "rs_arrival_slot"));
        // The reduced slabs' puts: what ar_done waits for on every peer's word, an even (64-bit) slot.
        expect(signalled(m, AR_NVSHMEM_PUSH.table)).toEqual(doneWaits(m));
        const reduce = m.kernels.find((k) => k.name === "ar_reduce")!;
        const doneBase = reduce.template.params.done_base as number;
        const perMBlock = Math.ceil(N / (reduce.template.params.BLOCK_N as number));
        const rowsPerRank = M / world;
        nvshmemRows(m, AR_NVSHMEM_PUSH.table).forEach((rows, rank) => {
          const real = rows.filter((r) => r.notify_at >= 0);
          expect(real).toHaveLength((world - 1) * (rowsPerRank / TILE.BM));
          for (const r of real) {
            // Each put waits for its m-block's reduced tiles, and moves this rank's rows to the same rows of the peer.
            const mb = r.wait_at - doneBase;
            expect(mb >= 0 && mb < rowsPerRank / TILE.BM && r.wait_arrivals === perMBlock).toBe(true);
            expect(r.src_offset).toBe((rank * rowsPerRank + mb * TILE.BM) * N);
            expect(r.dst_offset).toBe(r.src_offset);
            expect(r.dst_rank).not.toBe(rank);
            expect(r.notify_at % 2).toBe(0);
            expect(r.notify_at).toBeGreaterThanOrEqual(nvshmemSlot(Math.ceil((doneBase + rowsPerRank / TILE.BM) / 2)));
          }
        });
      }),
      { numRuns: 12 },
    );
  });

  it("keeps refusing the tile-wise AllReduce, naming the partitioned plan", async () => {
    const e = await compile(op(128, 64, 2, 1, true)).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(EmitError);
    expect((e as EmitError).message).toMatch(/nvshmem transfer backend realises GEMM\+AllReduce as .*tile-wise AllReduce/);
  });
});
