// `ovl run`: run a manifest through the Python runner (@ovl/runtime-py): emulated on the
// CPU, or on N GPUs under torchrun. Streams the runner's progress to stderr as a bar and
// prints the report's summary (or the report itself with --json).
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { defaultPython, runManifest, RunnerError, type Report, type RunnerProgress } from "@ovl/runtime-py";
import { CliError, UsageError } from "../errors.js";
import { ProgressBar, type CommandOutput, type Io } from "../io.js";

/** Flags of `ovl run`. */
export interface RunFlags {
  emulate?: boolean;
  gpus?: number;
  dryRun?: boolean;
  baselines?: boolean;
  epochs?: number;
  out?: string;
  python?: string;
  /** `--engine numpy | interpret | auto`: the CPU emulation engine (implies the emulation). */
  engine?: string;
}

/** The CPU emulation engines `ovl run --engine` takes. */
export const ENGINES = ["numpy", "interpret", "auto"] as const;
/** An emulation engine. */
export type Engine = (typeof ENGINES)[number];

/**
 * The engine `--engine` names (default `auto`).
 * @throws {UsageError} for another name, or with `--gpus` (the engines emulate on the CPU).
 */
export function parseEngine(flags: Pick<RunFlags, "engine" | "gpus">): Engine {
  if (flags.engine === undefined) return "auto";
  if (!(ENGINES as readonly string[]).includes(flags.engine))
    throw new UsageError("usage", `--engine must be one of ${ENGINES.join(", ")}, got '${flags.engine}' (for example: --engine numpy)`);
  if (flags.gpus !== undefined) throw new UsageError("usage", "--engine picks the CPU emulation; drop it to run on GPUs with --gpus");
  return flags.engine as Engine;
}

/** Why `python` cannot run the interpreter engine (torch or triton missing), or undefined. */
export function interpreterUnavailable(python: string): string | undefined {
  const probe = "import importlib.util as u; print(' '.join(p for p in ('torch', 'triton') if u.find_spec(p) is None))";
  const r = spawnSync(python, ["-c", probe], { encoding: "utf8", timeout: 30_000 });
  if (r.error !== undefined) return `${python} could not be started (${r.error.message})`;
  if (r.status !== 0) return `${python} could not check for torch and triton: ${r.stderr.trim().split("\n").pop() ?? ""}`;
  const missing = r.stdout.trim();
  return missing === "" ? undefined : `${python} has no ${missing.split(" ").join(" and ")}`;
}

/** The engine a report was run with, from its device (`cpu-emulation` is numpy's, `cpu-interpreter` the interpreter's). */
export function engineOfReport(r: Report): Engine | undefined {
  return r.device === "cpu-interpreter" ? "interpret" : r.device === "cpu-emulation" ? "numpy" : undefined;
}

/** The manifest facts `ovl run` checks before starting Python. */
export function readManifestHead(path: string): { name: string; world: number; checkRuns: number } {
  if (!existsSync(path)) throw new UsageError("bad-file", `no manifest at ${path}; write one with: ovl emit ag-gemm --world 2 --out DIR`);
  let json: { name?: unknown; world?: unknown; timing?: { checkRuns?: unknown } };
  try {
    json = JSON.parse(readFileSync(path, "utf8")) as typeof json;
  } catch (e) {
    throw new UsageError("bad-file", `${path} is not JSON: ${(e as Error).message}`);
  }
  if (typeof json.world !== "number" || typeof json.name !== "string") {
    throw new UsageError("bad-file", `${path} is not an ovl.manifest/v1 (no name or world); write one with: ovl emit`);
  }
  return { name: json.name, world: json.world, checkRuns: typeof json.timing?.checkRuns === "number" ? json.timing.checkRuns : 3 };
}

/** The torchrun command line that runs `manifest` on `gpus` GPUs. */
export function torchrunCommand(manifest: string, gpus: number, out: string, baselines: boolean): string {
  return `torchrun --nproc_per_node=${gpus} -m ovl_runtime run ${manifest} --out ${out}${baselines ? " --baselines" : ""}`;
}

/** One line per report: mode, checks, time, baselines. */
export function summarizeReport(r: Report): string[] {
  const worst = r.checks.reduce((m, c) => Math.max(m, c.maxRelError ?? Infinity), 0);
  const lines = [
    `${r.manifest}: ${r.ok ? "ok" : "FAILED"} — ${r.mode} on ${r.device}, world ${r.world}, ${r.shapes.operator} M=${r.shapes.M} N=${r.shapes.N} K=${r.shapes.K}`,
    `  checks: ${r.checks.length} launches, max relative error ${worst.toExponential(2)} (tolerance ${r.checks[0]?.tolerance ?? "?"})`,
  ];
  if (r.times !== null) lines.push(`  time: ${r.times.maxMedian.toFixed(3)} ms (${r.times.clock}, median, slowest rank)`);
  for (const b of r.baselines)
    lines.push(`  baseline ${b.name}: ${b.ms === null ? `n/a (${b.error ?? "failed"})` : `${b.ms.toFixed(3)} ms`}`);
  for (const f of r.failures) lines.push(`  ✗ ${f.code}: ${f.message}`);
  return lines;
}

/** Run `ovl run`. With `--gpus N --dry-run`, only prints the torchrun command. */
export async function runCommand(manifestArg: string, flags: RunFlags, io: Io): Promise<CommandOutput & { report?: Report }> {
  const manifest = resolve(manifestArg);
  const head = readManifestHead(manifest);
  const out = resolve(flags.out ?? join(dirname(manifest), "report.json"));
  if (flags.gpus !== undefined) {
    if (flags.emulate) throw new UsageError("usage", "--gpus and --emulate exclude each other: drop --emulate to run on GPUs");
    if (flags.gpus !== head.world) {
      throw new UsageError(
        "bad-mesh",
        `${head.name} is for ${head.world} ranks: use --gpus ${head.world}, or emit it again with --world ${flags.gpus}`,
      );
    }
    const command = torchrunCommand(manifest, flags.gpus, out, flags.baselines === true);
    if (flags.dryRun) return { json: { command, manifest, world: head.world }, lines: [command] };
    io.err(`$ ${command}\n`);
  } else if (flags.dryRun) {
    throw new UsageError("usage", "--dry-run prints the torchrun command and needs --gpus N");
  }
  const engine = parseEngine(flags);
  if (engine === "interpret") {
    // Checked here: the runner would otherwise fail deep in its start with a less direct message.
    const why = interpreterUnavailable(flags.python ?? defaultPython());
    if (why !== undefined)
      throw new CliError(
        "run-failed",
        `--engine interpret runs the kernels under Triton's CPU interpreter, which needs torch and triton: ${why}. Install them into that interpreter (pip install 'packages/runtime-py[interpret]': torch 2.11.0, triton 3.6.0), point --python at one that has them, or use --engine numpy`,
      );
  }
  const total = flags.epochs ?? head.checkRuns;
  const bar = new ProgressBar(io, `run ${head.name}`);
  let checks = 0;
  const onProgress = (e: RunnerProgress): void => {
    if (e.event === "check")
      bar.update(++checks, total, `max rel error ${typeof e.maxRelError === "number" ? e.maxRelError.toExponential(1) : "n/a"}`);
    else if (e.event === "timing") bar.update(checks, total, "timing");
  };
  try {
    const report = await runManifest(manifest, {
      // Without --gpus there is no torchrun to start the ranks: the CPU emulation runs them.
      emulate: flags.gpus === undefined,
      ...(flags.gpus !== undefined ? { nproc: flags.gpus } : {}),
      ...(flags.baselines ? { baselines: true } : {}),
      ...(flags.epochs !== undefined ? { epochs: flags.epochs } : {}),
      ...(flags.python !== undefined ? { python: flags.python } : {}),
      ...(flags.gpus === undefined ? { engine } : {}),
      out,
      onProgress,
    });
    bar.finish();
    const used = engineOfReport(report);
    const engineLine =
      used === undefined
        ? []
        : [
            `  engine: ${used}${engine === "auto" ? " (auto: the interpreter for a compiled local body where torch and triton are installed, else numpy)" : ""}`,
          ];
    return { report, json: report, lines: [...summarizeReport(report), ...engineLine, `wrote ${out}`] };
  } catch (e) {
    bar.finish();
    if (e instanceof RunnerError) {
      const lines = e.report ? summarizeReport(e.report) : [];
      throw new CliError("run-failed", [`the runner failed (${e.code}): ${e.message}`, ...lines].join("\n"));
    }
    throw e;
  }
}
