// Small hand-built `ovl.manifest/v1` documents for the driver's tests: a copy-engine push
// AllGather feeding a consumer GEMM that waits per chunk (the runner's own tests build more).
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";

type Json = Record<string, unknown>;

/** AG+GEMM on `world` ranks, `split` chunks per shard, BLOCK_M 16, fp32. */
export function agGemmManifest(world = 2, M = 64, N = 32, K = 16, split = 2): Json {
  const BM = 16;
  const rpr = M / world;
  const perRank = rpr / BM;
  const perChunk = perRank / split;
  const rows = rpr / split;
  const order: number[][] = [];
  const slots: number[][] = [];
  const hostOps: Json[] = [];
  for (let r = 0; r < world; r++) {
    const o: number[] = [];
    for (let i = 0; i < world; i++) {
      const src = (r - i + world) % world;
      for (let b = 0; b < perRank; b++) o.push(src * perRank + b);
    }
    order.push(o);
    slots.push(
      Array.from({ length: M / BM }, (_, m) =>
        Math.floor(m / perRank) === r ? -1 : Math.floor(m / perRank) * split + Math.floor((m % perRank) / perChunk),
      ),
    );
    const ops: Json[] = [];
    for (let i = 1; i < world; i++) {
      const p = (r + i) % world;
      for (let j = 0; j < split; j++) {
        const offset = (r * rpr + j * rows) * K;
        ops.push({
          kind: "copy",
          src: { buffer: "A", rank: r, offset, length: rows * K },
          dst: { buffer: "A", rank: p, offset, length: rows * K },
          signal: { rank: p, slot: r * split + j },
        });
      }
    }
    hostOps.push({ rank: r, streams: [{ name: "push", ops }] });
  }
  const arg = (name: string, value: Json): Json => ({ name, value });
  return {
    $schema: "ovl.manifest/v1",
    name: `ag_gemm_w${world}`,
    world,
    dtype: "fp32",
    buffers: [
      { name: "A", shape: [M, K], dtype: "fp32", symmetric: true, init: "random" },
      { name: "B", shape: [K, N], dtype: "fp32", symmetric: false, init: "random" },
      { name: "C", shape: [M, N], dtype: "fp32", symmetric: false, init: "poison" },
      { name: "sig", shape: [world * split], dtype: "uint32", symmetric: true, init: "zeros" },
    ],
    signals: { buffer: "sig", slots: world * split, bits: 32 },
    tables: [
      { name: "order", dtype: "int32", values: order },
      { name: "wait_slot", dtype: "int32", values: slots },
    ],
    kernels: [
      {
        name: "ag_gemm_consumer",
        source: "ag_gemm_consumer.py",
        entry: "ag_gemm_consumer",
        stream: "compute",
        grid: [{ kind: "num-sms", cap: (M / BM) * Math.ceil(N / 32) }],
        numWarps: 4,
        numStages: 3,
        args: [
          arg("a_ptr", { kind: "buffer", name: "A" }),
          arg("b_ptr", { kind: "buffer", name: "B" }),
          arg("c_ptr", { kind: "buffer", name: "C" }),
          arg("order_ptr", { kind: "table", name: "order" }),
          arg("slot_ptr", { kind: "table", name: "wait_slot" }),
          arg("sig_ptr", { kind: "buffer", name: "sig" }),
          arg("err_ptr", { kind: "error-buffer" }),
          arg("M", { kind: "int", value: M }),
          arg("N", { kind: "int", value: N }),
          arg("K", { kind: "int", value: K }),
          arg("rank", { kind: "rank" }),
          arg("target", { kind: "epoch-target", arrivals: 1 }),
          arg("timeout_ns", { kind: "timeout-ns" }),
        ],
        constexprs: { BLOCK_M: BM, BLOCK_N: 32, BLOCK_K: 16, GROUP_M: 2 },
        template: { kind: "ag-gemm-consumer", params: { M, N, K, BLOCK_M: BM, BLOCK_N: 32, BLOCK_K: 16, GROUP_M: 2 } },
      },
    ],
    hostOps,
    reference: { operator: "ag-gemm", M, N, K, inputs: { A: "A", B: "B" }, output: "C", rowsPerRank: rpr, tolerance: 1e-4 },
    timing: { warmup: 1, reps: 3, checkRuns: 3 },
    waitTimeoutNs: 2_000_000_000,
  };
}

/** Writes `manifest` (and an empty source file per kernel) into `dir`; returns the manifest path. */
export async function writeManifest(dir: string, manifest: Json): Promise<string> {
  await mkdir(dir, { recursive: true });
  for (const k of manifest.kernels as { source: string }[]) await writeFile(join(dir, k.source), "# kernel source\n");
  const path = join(dir, "manifest.json");
  await writeFile(path, JSON.stringify(manifest));
  return path;
}
