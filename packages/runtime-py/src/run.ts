// Runs a manifest with the Python runner (`python -m ovl_runtime run`) through execa:
// streams its JSON-line progress, reads and validates the `ovl.report/v1` it writes, and
// turns every failure into a RunnerError carrying the runner's own message.
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";
import { execa } from "execa";
import { RunnerError, codeOfExit } from "./errors.js";
import { Report } from "./report.js";

/** A progress line of the runner: `{ event: "start" | "launch" | "check" | "failure" | "error" | "done" | ..., ... }`. */
export interface RunnerProgress {
  event: string;
  [key: string]: unknown;
}

/** Options of {@link runManifest}. */
export interface RunManifestOptions {
  /** Run on the CPU (ranks as threads over numpy arrays) instead of GPUs. */
  emulate?: boolean;
  /**
   * Emulation only: `numpy` (the templates re-implemented in numpy), `interpret` (the kernels'
   * own source under Triton's CPU interpreter; needs torch and triton) or `auto` (the runner's choice).
   */
  engine?: "auto" | "numpy" | "interpret";
  /** Python interpreter; default: this package's `.venv/bin/python` if present, else `python3`. */
  python?: string;
  /** Where the report is written; default: a temporary file, removed afterwards. */
  out?: string;
  /** Also time torch GEMM, NCCL collective, both in sequence, and PyTorch async-TP (GPU mode). */
  baselines?: boolean;
  /** Checked launches in a row (default: the manifest's `timing.checkRuns`). */
  epochs?: number;
  /** Emulation only: bound of every wait, in seconds (the numpy engine counts it from the waited slot's last change). */
  timeoutS?: number;
  /** GPU mode: processes to start under `torch.distributed.run` (one per GPU; the manifest's world). */
  nproc?: number;
  /** GPU mode: PyTorch symmetric-memory backend (default `auto`: NVSHMEM for manifests that put through NVSHMEM, else CUDA). */
  symmBackend?: "auto" | "cuda" | "nvshmem";
  /**
   * Run every rank of the manifest in one process on one GPU (`--ranks-on-one-gpu`; no
   * torchrun, so `nproc` is ignored): a correctness check, its times are not performance.
   */
  ranksOnOneGpu?: boolean;
  /** Called with each progress line as it arrives. */
  onProgress?: (event: RunnerProgress) => void;
  /** Extra environment for the runner. */
  env?: Record<string, string>;
}

const PACKAGE_ROOT = fileURLToPath(new URL("..", import.meta.url));

/** The interpreter used when none is given: the package venv's python, else `python3`. */
export function defaultPython(): string {
  const venv = join(PACKAGE_ROOT, ".venv", "bin", "python");
  return existsSync(venv) ? venv : "python3";
}

/** The command line that runs `manifestPath` (without the interpreter). */
export function runnerArgs(manifestPath: string, out: string, o: RunManifestOptions): string[] {
  const torchrun = o.nproc !== undefined && o.nproc > 1 && !o.emulate && !o.ranksOnOneGpu;
  const head = torchrun ? ["-m", "torch.distributed.run", `--nproc_per_node=${o.nproc}`] : [];
  const args = [...head, "-m", "ovl_runtime", "run", manifestPath, "--out", out];
  if (o.emulate) args.push("--emulate");
  if (o.engine !== undefined) args.push("--engine", o.engine);
  if (o.baselines) args.push("--baselines");
  if (o.epochs !== undefined) args.push("--epochs", String(o.epochs));
  if (o.timeoutS !== undefined) args.push("--timeout-s", String(o.timeoutS));
  if (o.symmBackend !== undefined) args.push("--symm-backend", o.symmBackend);
  if (o.ranksOnOneGpu) args.push("--ranks-on-one-gpu");
  return args;
}

function parseProgress(line: string): RunnerProgress | undefined {
  if (!line.startsWith("{")) return undefined;
  try {
    const v: unknown = JSON.parse(line);
    if (typeof v === "object" && v !== null && typeof (v as { event?: unknown }).event === "string") return v as RunnerProgress;
  } catch {
    // a torchrun or library line that merely starts with a brace
  }
  return undefined;
}

async function readReport(path: string): Promise<Report | string> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch {
    return `the runner wrote no report at ${path}`;
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    return `the report at ${path} is not JSON: ${(e as Error).message}`;
  }
  const parsed = Report.safeParse(json);
  return parsed.success ? parsed.data : `the report at ${path} is not ovl.report/v1: ${parsed.error.message}`;
}

/**
 * Runs a manifest with `python -m ovl_runtime run` and returns its report.
 *
 * Resolves with the report when every check passed; rejects with a {@link RunnerError}
 * otherwise (`code` from the runner's exit code: 1 `check-failed`, 2 `bad-manifest`,
 * 3 `wait-timeout`; `error.report` holds the report when one was written).
 */
export async function runManifest(manifestPath: string, options: RunManifestOptions = {}): Promise<Report> {
  const python = options.python ?? defaultPython();
  const tmp = options.out === undefined ? await mkdtemp(join(tmpdir(), "ovl-report-")) : undefined;
  const out = options.out ?? join(tmp ?? "", "report.json");
  const src = join(PACKAGE_ROOT, "src");
  const pythonPath = existsSync(join(src, "ovl_runtime"))
    ? [src, process.env.PYTHONPATH].filter(Boolean).join(delimiter)
    : process.env.PYTHONPATH;
  const events: RunnerProgress[] = [];
  const stderrLines: string[] = [];
  try {
    const child = execa(python, runnerArgs(manifestPath, out, options), {
      reject: false,
      stdin: "ignore",
      env: { ...options.env, ...(pythonPath ? { PYTHONPATH: pythonPath } : {}) },
    });
    for await (const line of child.iterable({ from: "stderr" })) {
      stderrLines.push(line);
      const event = parseProgress(line);
      if (event) {
        events.push(event);
        options.onProgress?.(event);
      }
    }
    const result = await child;
    if (result.exitCode === undefined) {
      throw new RunnerError("spawn-failed", `could not run ${python}: ${result.originalMessage ?? result.message}`, {
        stderr: stderrLines.join("\n"),
      });
    }
    const lastError = [...events].reverse().find((e) => e.event === "error");
    const report = result.exitCode === 2 ? undefined : await readReport(out);
    if (result.exitCode === 0) {
      if (typeof report === "string" || report === undefined) throw new RunnerError("bad-report", report ?? "no report", { exitCode: 0 });
      return report;
    }
    const code = codeOfExit(result.exitCode, typeof lastError?.code === "string" ? lastError.code : undefined);
    const tail = stderrLines.slice(-20).join("\n");
    const message = typeof lastError?.message === "string" ? lastError.message : `the runner exited with ${result.exitCode}: ${tail}`;
    throw new RunnerError(code, message, {
      exitCode: result.exitCode,
      stderr: stderrLines.join("\n"),
      ...(typeof report === "object" ? { report } : {}),
    });
  } finally {
    if (tmp !== undefined) await rm(tmp, { recursive: true, force: true });
  }
}
