import { type ChunkPlan, lowerToTileSchedule, planSignals, reduceScatterHierarchical } from "@ovl/chunk-plan";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Manifest } from "../../core/manifest/schema.js";
import { codeOf } from "../../testing/errors.js";
import { emitGemmRs } from "./template.js";

// The hierarchical GEMM+RS on the nvshmem backend: stage-1 puts inside the node, a slab-sum per
// rail, stage-2 puts of node sums over the rail, a slab-sum per slab. Checked here without running
// anything: every slot's signals against its waits, and a symbolic execution of the tables (which
// partial lands where, and what each sum adds up) against the ReduceScatter.

const BM = 16;
const Ncols = 32;

function plan(nodes: number, gpus: number, split: number, staged: boolean): ChunkPlan {
  const M = BM * nodes * gpus * split * 2;
  return planSignals(
    reduceScatterHierarchical({
      tensor: { name: "C", shape: [M, Ncols], dtype: "bf16" },
      src: "C_partial",
      axis: 0,
      mesh: [nodes, gpus],
      split,
      afterCompute: true,
      schedule: staged ? "staged" : "pipelined",
    }),
  );
}

function emit(p: ChunkPlan, backend: "nvshmem" | "sm" = "nvshmem"): Manifest {
  const M = p.tensors[0]!.shape[0]!;
  const schedule = lowerToTileSchedule(
    p,
    { tensor: "C_partial", problem: { M, N: Ncols, K: 32 }, tile: { BM, BN: 32, BK: 32 }, persistent: { numSms: 8 }, groupSizeM: 2 },
    { role: "producer" },
  );
  return emitGemmRs(p, schedule, { backend }).manifest;
}

const table = (m: Manifest, name: string) => m.tables.find((t) => t.name === name)!.values;
const rowsOf = (flat: readonly number[]) => Array.from({ length: flat.length / 7 }, (_, i) => flat.slice(7 * i, 7 * i + 7));
const arg = (m: Manifest, kernel: string, name: string) =>
  m.kernels.find((k) => k.name === kernel)!.args.find((a) => a.name === name)!.value;
const intArg = (m: Manifest, kernel: string, name: string) => {
  const v = arg(m, kernel, name);
  if (v.kind !== "int") throw new Error(`${kernel}.${name} is not an int`);
  return v.value;
};

/**
 * Symbolic execution of the manifest's tables: each buffer element block holds the set of
 * `rank:m-block` partials summed into it. Puts copy sets, slab-sums union their contributions (own
 * in place, staged ones only where their slot is signalled by a put of that block). Returns each
 * rank's `rs_out` blocks and checks every wait's slot gets exactly its arrivals.
 */
function execute(m: Manifest, nodes: number, gpus: number): string[][][] {
  const world = nodes * gpus;
  const M = m.buffers.find((b) => b.name === "C_partial")!.shape[0]!;
  const blockElems = BM * Ncols;
  const signals = new Map<string, number>();
  const add = (rank: number, slot: number) => signals.set(`${rank}:${slot}`, (signals.get(`${rank}:${slot}`) ?? 0) + 1);
  const bufs = new Map<string, string[][]>();
  const buf = (name: string, rank: number, blocks: number) => {
    const key = `${name}@${rank}`;
    if (!bufs.has(key))
      bufs.set(
        key,
        Array.from({ length: blocks }, () => []),
      );
    return bufs.get(key)!;
  };
  const blocksOf = (name: string) => {
    const shape = m.buffers.find((b) => b.name === name)!.shape;
    return shape.reduce((a, b) => a * b, 1) / blockElems;
  };
  for (let r = 0; r < world; r++) {
    const c = buf("C_partial", r, M / BM);
    for (let b = 0; b < M / BM; b++) c[b] = [`${r}:${b}`];
  }
  const put = (kernel: string) => {
    const src = (arg(m, kernel, "src_ptr") as { name: string }).name;
    const dst = (arg(m, kernel, "dst_ptr") as { name: string }).name;
    const seg = (arg(m, kernel, "seg_ptr") as { name: string }).name;
    table(m, seg).forEach((flat, r) =>
      rowsOf(flat).forEach(([so, pe, doff, len, , , notify]) => {
        if (notify! < 0) return;
        expect(len).toBe(blockElems);
        buf(dst, pe!, blocksOf(dst))[doff! / blockElems] = [...buf(src, r, blocksOf(src))[so! / blockElems]!];
        add(pe!, notify!);
      }),
    );
  };
  const sum = (kernel: string) => {
    const name = (a: string) => (arg(m, kernel, a) as { name: string }).name;
    const blocks = intArg(m, kernel, "blocks");
    const done = intArg(m, kernel, "done_base");
    const contrib = m.kernels.find((k) => k.name === kernel)!.constexprs.CONTRIB as number;
    for (let r = 0; r < world; r++) {
      const slots = table(m, name("slot_ptr"))[r]!;
      const own = table(m, name("block_ptr"))[r]!;
      const out = buf(name("out_ptr"), r, blocksOf(name("out_ptr")));
      for (let i = 0; i < blocks; i++) {
        const acc: string[] = [];
        for (let k = 0; k < contrib; k++) {
          const slot = slots[k * blocks + i]!;
          if (slot < 0) acc.push(...buf(name("own_ptr"), r, blocksOf(name("own_ptr")))[own[i]!]!);
          else {
            expect(signals.get(`${r}:${slot}`)).toBe(1); // its one put landed, once
            acc.push(...buf(name("part_ptr"), r, blocksOf(name("part_ptr")))[k * blocks + i]!);
          }
        }
        out[i] = acc.sort();
        if (done >= 0) for (let t = 0; t < Math.ceil(Ncols / 32); t++) add(r, done + i);
      }
    }
  };
  const stage2Waits = () =>
    table(m, "net_segments").forEach((flat, r) =>
      rowsOf(flat).forEach(([, , , , wait, arrivals]) => {
        if (wait! >= 0) expect(signals.get(`${r}:${wait}`)).toBe(arrivals);
      }),
    );
  put("nvshmem_push");
  sum("node_sum");
  stage2Waits();
  put("nvshmem_push_net");
  sum("rs_reduce");
  return Array.from({ length: world }, (_, r) => buf("rs_out", r, blocksOf("rs_out")));
}

/** What every rank's `rs_out` must hold: for each m-block of its slab, every rank's partial of it. */
function reduceScattered(p: ChunkPlan, world: number): string[][][] {
  const slab = p.tensors[0]!.shape[0]! / world / BM;
  return Array.from({ length: world }, (_, r) =>
    Array.from({ length: slab }, (_, j) => Array.from({ length: world }, (_, q) => `${q}:${r * slab + j}`).sort()),
  );
}

describe("the hierarchical GEMM+ReduceScatter on the nvshmem backend", () => {
  it("sums every rank's partial of each m-block of a slab exactly once, for any nodes, GPUs per node, split and schedule", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 3 }),
        fc.integer({ min: 2, max: 4 }),
        fc.integer({ min: 1, max: 2 }),
        fc.boolean(),
        (nodes, gpus, split, staged) => {
          const p = plan(nodes, gpus, split, staged);
          const m = emit(p);
          expect(execute(m, nodes, gpus)).toEqual(reduceScattered(p, nodes * gpus));
          const slab = p.tensors[0]!.shape[0]! / (nodes * gpus) / BM;
          // Stage 1 stays inside the node, stage 2 crosses it on the rail: (nodes - 1) · slab blocks per rank.
          const node = (r: number) => Math.floor(r / gpus);
          table(m, "push_segments").forEach((flat, r) => {
            for (const row of rowsOf(flat)) if (row[6]! >= 0) expect(node(row[1]!)).toBe(node(r));
          });
          table(m, "net_segments").forEach((flat, r) => {
            const net = rowsOf(flat).filter((row) => row[6]! >= 0);
            expect(net.length).toBe((nodes - 1) * slab);
            for (const row of net) expect([node(row[1]!) !== node(r), row[1]! % gpus]).toEqual([true, r % gpus]);
          });
          expect(m.kernels.map((k) => k.template.kind)).toEqual(["gemm-producer", "nvshmem-push", "slab-sum", "nvshmem-push", "slab-sum"]);
          expect(m.kernels.filter((k) => k.requires !== undefined).map((k) => k.stream)).toEqual(["comm", "comm"]);
        },
      ),
      { numRuns: 20 },
    );
  });

  it("a lost or misplaced put is seen by the symbolic execution (the check can fail)", () => {
    const p = plan(2, 2, 1, false);
    const misplaced = emit(p);
    const flat = misplaced.tables.find((t) => t.name === "net_segments")!.values[0]!;
    const first = flat.findIndex((_, i) => i % 7 === 2 && flat[i + 4]! >= 0);
    flat[first] = flat[first]! + BM * Ncols; // the node sum lands one m-block off
    expect(execute(misplaced, 2, 2)).not.toEqual(reduceScattered(p, 4));
    const lost = emit(p);
    const seg = lost.tables.find((t) => t.name === "push_segments")!.values[1]!;
    seg[6] = -1; // rank 1's first stage-1 put signals nothing: the node sum would wait for it
    expect(() => execute(lost, 2, 2)).toThrow();
  });

  it("is refused on the other backends, naming what works; with one GPU per node it is the direct GEMM+RS", () => {
    expect(() => emit(plan(2, 2, 1, false), "sm")).toThrow(/nvshmem.*reduceScatterDirect/);
    expect(codeOf(() => emit(plan(2, 2, 1, false), "sm"))).toBe("unsupported-op");
    // Nothing to sum inside a node of one GPU: each node's partial goes straight to the slab owner.
    expect(emit(plan(2, 1, 1, false)).kernels.map((k) => k.template.kind)).toEqual(["gemm-producer", "nvshmem-push", "rs-reduce"]);
  });
});
