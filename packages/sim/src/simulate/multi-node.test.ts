// The two-level model: rank → node and NIC, the network path beside NVLink, contention on a
// shared NIC, its provenance and checks; that a plan whose transfers stay inside nodes
// simulates as on one node; that no AllGather over the network beats its bytes over the NICs.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  allGatherRing,
  allGatherSwizzle,
  type ChunkPlan,
  lowerToTileSchedule,
  type Op,
  PlanBuilder,
  planSignals,
  push,
  reduceScatterHierarchical,
  applyTileArrivals,
} from "@ovl/chunk-plan";
import { H200_SXM } from "./hardware.js";
import { H200_SXM_2x8, H200_SXM_4x8, multiNode, NDR400_PER_GPU } from "./multi-node.js";
import { crossesNodes, modelGpus, nicOf, nodeOf, ranksPerNode } from "./network.js";
import { resolveHardware } from "./registry.js";
import { simulateComm } from "./comm.js";
import { simulate } from "./simulate.js";
import { collectiveMs } from "./cost.js";
import { fabricCollective } from "./collective-fabric.js";
import { predictBaselines } from "./baselines.js";

const code = (f: () => unknown): string | undefined => {
  try {
    f();
  } catch (e) {
    return (e as { code?: string }).code;
  }
  return undefined;
};

/** One transfer per listed (src, dst) pair, all at once: rank `src` pushes `rows` rows of its own block to `dst`. */
function transfers(world: number, pairs: readonly (readonly [number, number])[], rows = 4096, cols = 4096): ChunkPlan {
  const b = new PlanBuilder({ name: "pairs", mesh: [world] });
  b.tensor({ name: "A", shape: [world * rows, cols], dtype: "bf16" });
  for (let r = 0; r < world; r++) b.local(r, { tensor: "A", offsets: [r * rows, 0], sizes: [rows, cols] });
  pairs.forEach(([src, dst], k) => {
    const region = { tensor: "A", offsets: [src * rows, 0], sizes: [rows, cols] };
    b.add(src, k, push(dst, region, region));
  });
  return b.build();
}

const dataMs = (plan: ChunkPlan, hw = H200_SXM_2x8, backend: "copy-engine" | "sm" = "copy-engine") =>
  simulateComm({ plan, hardware: hw, backend, commSms: backend === "sm" ? 16 : 0, computeDone: () => 0 });

describe("two-level hardware model", () => {
  it("places rank r on node floor(r / gpusPerNode), one NIC per GPU by default, fewer NICs shared", () => {
    expect([0, 7, 8, 15].map((r) => nodeOf(H200_SXM_2x8, r))).toEqual([0, 0, 1, 1]);
    expect([0, 7, 8, 31].map((r) => nodeOf(H200_SXM_4x8, r))).toEqual([0, 0, 1, 3]);
    expect(nodeOf(H200_SXM, 63)).toBe(0);
    expect(crossesNodes(H200_SXM_2x8, 7, 8)).toBe(true);
    expect(crossesNodes(H200_SXM_2x8, 8, 15)).toBe(false);
    expect([0, 1, 7, 8].map((r) => nicOf(H200_SXM_2x8, r))).toEqual([0, 1, 7, 8]);
    const two = multiNode(H200_SXM, { nodes: 2, gpusPerNode: 8, network: { nicsPerNode: 2 } });
    expect([0, 3, 4, 7, 8, 12].map((r) => nicOf(two, r))).toEqual([0, 0, 1, 1, 2, 3]);
    expect(ranksPerNode(H200_SXM_2x8, 16)).toBe(8);
    expect(ranksPerNode(H200_SXM, 16)).toBe(16);
    expect(modelGpus(H200_SXM_4x8)).toBe(32);
  });

  it("is a zod-checked HardwareModel: built-ins by name, bad fields as SimulateError bad-hardware, network numbers labelled", () => {
    expect(resolveHardware("H200_SXM_2x8")).toBe(H200_SXM_2x8);
    expect(H200_SXM_2x8.topology).toEqual({ nodes: 2, gpusPerNode: 8, network: NDR400_PER_GPU });
    expect(H200_SXM_2x8.topology?.network.nicGBps).toBe(50);
    expect(H200_SXM_2x8.source.network).toMatch(/^derived, not measured/);
    expect(H200_SXM_2x8.source.topology).toMatch(/^assumed/);
    expect(code(() => multiNode(H200_SXM, { nodes: 2, gpusPerNode: 8, network: { nicsPerNode: 9 } }))).toBe("bad-hardware");
    expect(code(() => multiNode(H200_SXM, { nodes: 0, gpusPerNode: 8 }))).toBe("bad-hardware");
    expect(code(() => multiNode(H200_SXM, { nodes: 2, gpusPerNode: 8, network: { nicGBps: -1 } }))).toBe("bad-hardware");
    expect(code(() => resolveHardware({ ...H200_SXM_2x8, topology: { nodes: 2, gpusPerNode: 0, network: NDR400_PER_GPU } }))).toBe(
      "bad-hardware",
    );
    // A plan with more ranks than the model has GPUs is refused.
    const plan = planSignals(allGatherSwizzle({ tensor: { name: "A", shape: [32 * 128, 256], dtype: "bf16" }, axis: 0, mesh: [32] }));
    const schedule = lowerToTileSchedule(plan, {
      tensor: "A",
      problem: { M: 32 * 128, N: 256, K: 256 },
      tile: { BM: 128, BN: 128, BK: 64 },
    });
    expect(code(() => simulate(plan, schedule, { hardware: H200_SXM_2x8 }))).toBe("bad-hardware");
  });

  it("sends between nodes over the NICs (line rate, one message latency), inside a node over NVLink as before", () => {
    const bytes = 4096 * 4096 * 2;
    const [net] = dataMs(transfers(16, [[0, 8]]));
    const [nvl] = dataMs(transfers(16, [[0, 1]]));
    expect(net!.dataEnd - net!.dataStart).toBeCloseTo(bytes / 50e6, 9);
    expect(nvl!.dataEnd - nvl!.dataStart).toBeCloseTo(bytes / (H200_SXM.copyEngine.bandwidthGBps * 1e6), 9);
    // Its launch also pays the network latency; the same op on the one-node model is an NVLink copy.
    expect(net!.dataStart - net!.start).toBeCloseTo(nvl!.dataStart - nvl!.start + NDR400_PER_GPU.latencyUs * 1e-3, 9);
    const [oneNode] = dataMs(transfers(16, [[0, 8]]), H200_SXM);
    expect(oneNode!.dataEnd - oneNode!.dataStart).toBeCloseTo(nvl!.dataEnd - nvl!.dataStart, 9);
    // With SM copies, a network transfer takes no copy SMs: the NIC moves it at line rate.
    const [smNet] = dataMs(transfers(16, [[0, 8]]), H200_SXM_2x8, "sm");
    expect(smNet!.dataEnd - smNet!.dataStart).toBeCloseTo(bytes / 50e6, 9);
  });

  it("shares a NIC: two GPUs behind one NIC, or two senders into one rank, each get half of it", () => {
    const bytes = 4096 * 4096 * 2;
    const alone = bytes / 50e6;
    const span = (ops: ReturnType<typeof dataMs>) => Math.max(...ops.map((o) => o.dataEnd)) - Math.min(...ops.map((o) => o.dataStart));
    // One NIC per GPU: ranks 0 and 1 sending to 8 and 9 do not meet.
    expect(
      span(
        dataMs(
          transfers(16, [
            [0, 8],
            [1, 9],
          ]),
        ),
      ),
    ).toBeCloseTo(alone, 9);
    // One NIC per node: they share its egress (and the far node's ingress).
    const shared = multiNode(H200_SXM, { nodes: 2, gpusPerNode: 8, network: { nicsPerNode: 1 } });
    const both = dataMs(
      transfers(16, [
        [0, 8],
        [1, 9],
      ]),
      shared,
    );
    for (const o of both) expect(o.dataEnd - o.dataStart).toBeCloseTo(2 * alone, 9);
    // Two senders into one rank share its NIC's ingress.
    const into = dataMs(
      transfers(16, [
        [0, 8],
        [1, 8],
      ]),
    );
    for (const o of into) expect(o.dataEnd - o.dataStart).toBeCloseTo(2 * alone, 9);
  });
});

/** `local` (a plan over G ranks) run independently on each of `nodes` nodes: rank n·G + g runs rank g's ops, peers shifted. */
function perNode(local: ChunkPlan, nodes: number): ChunkPlan {
  const G = local.ranks.length;
  const shift = (op: Op, n: number): Op => ({
    ...op,
    ...(op.kind === "p2p" ? { peer: op.peer + n * G } : {}),
    deps: op.deps.map((d) => ({ ...d, rank: d.rank + n * G })),
  });
  const { claim: _claim, signals: _signals, ...header } = local;
  return {
    ...header,
    mesh: { shape: [nodes * G] },
    ranks: Array.from({ length: nodes * G }, (_, r) => {
      const n = Math.floor(r / G);
      const rp = local.ranks[r % G]!;
      return { rank: r, local: rp.local, streams: rp.streams.map((ops) => ops.map((op) => shift(op, n))) };
    }),
  };
}

describe("two-level simulation (properties)", () => {
  it("a plan whose transfers all stay inside nodes simulates as the one-level model: rank n·G + g as rank g", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 2, max: 4 }),
        fc.integer({ min: 1, max: 2 }),
        fc.constantFrom("copy-engine", "sm") as fc.Arbitrary<"copy-engine" | "sm">,
        fc.boolean(),
        (nodes, G, split, backend, ring) => {
          const tensor = { name: "A", shape: [G * 256, 512], dtype: "bf16" } as const;
          const local = (ring ? allGatherRing : allGatherSwizzle)({ tensor, axis: 0, mesh: [G], split, side: "push" });
          const tiling = {
            tensor: "A",
            problem: { M: G * 256, N: 512, K: 512 },
            tile: { BM: 128, BN: 128, BK: 64 },
            persistent: { numSms: 116 },
          };
          const one = planSignals(local);
          const oneSim = simulate(one, lowerToTileSchedule(one, tiling), { hardware: H200_SXM, backend });
          const two = planSignals(perNode(local, nodes));
          const hw = multiNode(H200_SXM, { nodes, gpusPerNode: G });
          const twoSim = simulate(two, lowerToTileSchedule(two, tiling), { hardware: hw, backend });
          twoSim.ranks.forEach((r, k) => {
            const o = oneSim.ranks[k % G]!;
            for (const key of ["latencyMs", "computeAloneMs", "commAloneMs", "stallMs"] as const) {
              expect(r[key]).toBeCloseTo(o[key], 9);
            }
          });
        },
      ),
      { numRuns: 20 },
    );
  });

  it("no AllGather over the network (one GPU per node) beats its bytes through one NIC, however many nodes", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 8 }),
        fc.integer({ min: 1, max: 3 }),
        fc.constantFrom("swizzle", "ring") as fc.Arbitrary<"swizzle" | "ring">,
        fc.constantFrom("copy-engine", "sm") as fc.Arbitrary<"copy-engine" | "sm">,
        fc.integer({ min: 1, max: 4 }).map((k) => k * 128),
        (nodes, split, kind, backend, rows) => {
          const tensor = { name: "A", shape: [nodes * rows, 1024], dtype: "bf16" } as const;
          const plan = planSignals(
            kind === "ring"
              ? allGatherRing({ tensor, axis: 0, mesh: [nodes], split })
              : allGatherSwizzle({ tensor, axis: 0, mesh: [nodes], split }),
          );
          const hw = multiNode(H200_SXM, { nodes, gpusPerNode: 1 });
          const end = Math.max(...dataMs(plan, hw, backend).map((o) => o.end));
          const shardBytes = rows * 1024 * 2;
          // Every rank receives the other nodes' shards through its one NIC at line rate.
          expect(end).toBeGreaterThanOrEqual(((nodes - 1) * shardBytes) / (hw.topology!.network.nicGBps * 1e6) - 1e-12);
          // The NCCL-like fabric collective respects the node's NIC capacity too.
          const fab = fabricCollective(
            hw,
            "all-gather",
            nodes * shardBytes,
            Array.from({ length: nodes }, (_, r) => r),
          );
          expect(fab.ms).toBeGreaterThanOrEqual(((nodes - 1) * shardBytes) / (hw.topology!.network.nicGBps * 1e6));
        },
      ),
      { numRuns: 40 },
    );
  });
});

describe("hierarchical plans on the two-level model", () => {
  it("GEMM + hierarchical ReduceScatter: a network pull starts only after its source has reduced the node sum it sends", () => {
    const plan0 = planSignals(
      reduceScatterHierarchical({
        tensor: { name: "C", shape: [4096, 4096], dtype: "bf16" },
        src: "C_partial",
        axis: 0,
        mesh: [2, 8],
        afterCompute: true,
        schedule: "pipelined",
      }),
    );
    const schedule = lowerToTileSchedule(plan0, {
      tensor: "C_partial",
      problem: { M: 4096, N: 4096, K: 8192 },
      tile: { BM: 128, BN: 128, BK: 64 },
      persistent: { numSms: 132 },
    });
    const plan = applyTileArrivals(plan0, schedule);
    const sim = simulate(plan, schedule, { hardware: H200_SXM_2x8, backend: "sm", commSms: 16 });
    expect(sim.latencyMs).toBeGreaterThanOrEqual(sim.boundMs);
    const reduceEvents = sim.ranks.map((r) => r.events.filter((e) => e.kind === "reduce"));
    expect(reduceEvents.every((e) => e.length === 1)).toBe(true);
    // Each rank's network pulls begin after its source's GEMM (the reduction kernel runs after it) has ended.
    for (const r of sim.ranks) {
      const net = r.events.filter((e) => e.lane === "stream 1" && e.kind === "transfer" && e.label.startsWith("inter-node"));
      const peer = (r.rank + 8) % 16;
      const peerGemmEnd = Math.max(...sim.ranks[peer]!.events.filter((e) => e.kind === "wave").map((e) => e.endMs));
      for (const e of net) expect(e.startMs).toBeGreaterThan(peerGemmEnd);
    }
  });

  it("the baseline's collective across nodes runs on the fabric; inside one node it is the measured fit", () => {
    const bytes = 8192 * 4096 * 2;
    expect(fabricCollective(H200_SXM_2x8, "all-gather", bytes, [0, 1, 2, 3, 4, 5, 6, 7]).ms).toBe(
      collectiveMs(H200_SXM, "all-gather", bytes, 8),
    );
    const across = fabricCollective(
      H200_SXM_2x8,
      "reduce-scatter",
      bytes,
      Array.from({ length: 16 }, (_, r) => r),
    );
    expect(["ring", "hierarchical"]).toContain(across.algorithm);
    expect(across.ms).toBe(Math.min(across.ringMs!, across.hierarchicalMs!));
    const base = predictBaselines({
      hardware: "H200_SXM_2x8",
      problem: { M: 8192, N: 4096, K: 688 },
      collective: { kind: "reduce-scatter", shape: [8192, 4096], dtype: "bf16" },
      world: 16,
    });
    expect(base.collectiveMs).toBe(across.ms);
    expect(base.collectiveAlgorithm).toBe(across.algorithm);
    expect(
      code(() =>
        predictBaselines({
          ...{ hardware: "H200_SXM_2x8", problem: { M: 8, N: 8, K: 8 } },
          collective: { kind: "all-gather", shape: [64, 8], dtype: "bf16" },
          world: 17,
        }),
      ),
    ).toBe("bad-problem");
  });
});
