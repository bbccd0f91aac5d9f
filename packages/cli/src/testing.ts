// Test support: spawn the built `ovl` binary (dist/bin.js) and collect its output.
import { spawn } from "node:child_process";
import { chmodSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

/** The built binary. */
export const BIN = fileURLToPath(new URL("../dist/bin.js", import.meta.url));

/** What a run of the binary printed and its exit status. */
export interface OvlRun {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Run `ovl ...args` in `cwd`. */
export function ovl(args: readonly string[], cwd?: string): Promise<OvlRun> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("close", (status) => resolvePromise({ status, stdout, stderr }));
  });
}

/**
 * Write a stand-in for `python` that answers `-m torch.distributed.run … -m ovl_runtime run
 * <manifest> --out <report>` as the GPU runner would, without a GPU: it writes an
 * `ovl.report/v1` in `gpu` mode whose time is `0.1 ms × split` (read from the manifest's
 * `_s<split>` name) and, with `--baselines`, a not-overlapped baseline of 0.5 ms. It lets
 * tests check the CLI's GPU plumbing (argument passing, report reading, choosing the
 * fastest measured candidate); the numbers are the stand-in's, not a device's.
 */
export function fakeGpuRunner(dir: string): string {
  const path = `${dir}/fake-python.mjs`;
  const script = `#!${process.execPath}
import { readFileSync, writeFileSync, appendFileSync } from "node:fs";
const args = process.argv.slice(2);
appendFileSync(${JSON.stringify(`${dir}/calls.log`)}, args.join(" ") + "\\n");
const nproc = Number((args.find((a) => a.startsWith("--nproc_per_node=")) ?? "=1").split("=")[1]);
const manifestPath = args[args.indexOf("run") + 1];
const out = args[args.indexOf("--out") + 1];
const m = JSON.parse(readFileSync(manifestPath, "utf8"));
const split = Number((/_s(\\d+)$/.exec(m.name) ?? [0, 1])[1]);
const ms = 0.1 * split;
const report = {
  $schema: "ovl.report/v1", manifest: m.name, mode: "gpu", device: "stand-in GPU", world: nproc, dtype: m.dtype,
  shapes: { operator: m.reference.operator, M: m.reference.M, N: m.reference.N, K: m.reference.K, rowsPerRank: m.reference.rowsPerRank ?? null, buffers: {} },
  backends: { symmetricMemory: "CUDA", hostOps: "copy-engine", kernels: [] },
  epochs: 1,
  checks: [{ run: 0, epoch: 1, relErrors: [0.001], maxRelError: 0.001, tolerance: 0.02, ok: true }],
  times: { unit: "ms", clock: "cuda-events", perRank: [{ rank: 0, median: ms, p10: ms, p90: ms, samples: 3 }], maxMedian: ms },
  baselines: args.includes("--baselines") ? [{ name: "all-gather-then-gemm", ms: 0.5 }, { name: "gemm-then-reduce-scatter", ms: 0.5 }] : [],
  failures: [], ok: true,
};
console.error(JSON.stringify({ event: "check", run: 0, epoch: 1, maxRelError: 0.001, ok: true }));
writeFileSync(out, JSON.stringify(report));
`;
  writeFileSync(path, script);
  chmodSync(path, 0o755);
  return path;
}
