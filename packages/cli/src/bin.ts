#!/usr/bin/env node
// The `ovl` binary. `ovl demo` runs the CPU tour of the pipeline; the other commands of the
// design (plan, validate, emit, simulate, tune, run, report) are listed with their status.
import { runDemo } from "./demo.js";

const HELP = `ovl — compute–communication overlapped GPU kernels

Usage:
  ovl demo [--world N] [--split N] [--out DIR]   plan, validate, signal and lower AllGather+GEMM
                                                 for MLP-1 on the CPU; write the artefacts to DIR
  ovl --help                                     this text

Not in this version yet: plan, validate, emit, simulate, tune, run, report.`;

function intFlag(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(name);
  if (i < 0) return fallback;
  const raw = args[i + 1];
  const n = Number(raw);
  if (raw === undefined || !Number.isInteger(n) || n < 1) {
    throw new UsageError(`${name} needs a positive integer, got ${raw ?? "nothing"} (for example: ${name} 4)`);
  }
  return n;
}

class UsageError extends Error {}

function main(argv: string[]): number {
  const [command, ...rest] = argv;
  if (command === undefined || command === "--help" || command === "-h" || command === "help") {
    process.stdout.write(HELP + "\n");
    return command === undefined ? 2 : 0;
  }
  if (command === "demo") {
    if (rest.includes("--help")) {
      process.stdout.write(HELP + "\n");
      return 0;
    }
    const known = new Set(["--world", "--split", "--out"]);
    const unknown = rest.filter((a, i) => a.startsWith("--") && !known.has(a) && !known.has(rest[i - 1] ?? ""));
    if (unknown.length > 0) throw new UsageError(`unknown option ${unknown[0]}; try: ovl demo --world 8 --split 2 --out ovl-demo`);
    const outIndex = rest.indexOf("--out");
    runDemo({
      world: intFlag(rest, "--world", 8),
      split: intFlag(rest, "--split", 2),
      outDir: outIndex >= 0 ? rest[outIndex + 1] ?? "ovl-demo" : "ovl-demo",
    });
    return 0;
  }
  throw new UsageError(`unknown command "${command}"; this version has: ovl demo (see ovl --help)`);
}

try {
  process.exitCode = main(process.argv.slice(2));
} catch (err) {
  const msg = err instanceof Error ? err.message : String(err);
  process.stderr.write(`ovl: ${msg}\n`);
  process.exitCode = err instanceof UsageError ? 2 : 1;
}
