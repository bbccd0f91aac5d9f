// `ovl emit mlp`: the tensor-parallel MLP as one operator chain — AllGather + gate/up GEMM +
// SiLU-mul, then GEMM + ReduceScatter reading the first stage's output in place — written as
// two operator folders (`up/`, `down/`: kernels and manifest each) and one `chain.json`.
import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { allGatherSwizzle, planSignals } from "@ovl/chunk-plan";
import type { TargetName } from "@ovl/primitives";
import { compile, compileMlp, gemmSiluMulBody, withSiluMulDefaults, type OperatorDtype } from "@ovl/tlx-emitter";
import { DEFAULT_DTYPE, dtypeSuffix } from "../dtype.js";
import { UsageError } from "../errors.js";
import type { CommandOutput } from "../io.js";
import { parseMesh } from "../problem.js";
import { writeEmitted } from "./write-emitted.js";

/** The flags `ovl emit mlp` reads (`--m`/`--n`/`--k` name tokens, intermediate and hidden). */
export interface MlpFlags {
  tokens?: number;
  hidden?: number;
  intermediate?: number;
  m?: number;
  n?: number;
  k?: number;
  /** `--dtype` (checked by its parser; default bf16). */
  dtype?: OperatorDtype;
  world?: number;
  mesh?: string;
  split?: number;
  tile?: string;
  /** Whose tuned table decides the down stage's tile when `tile` is absent (default: the default target). */
  target?: TargetName | undefined;
}

function size(a: number | undefined, b: number | undefined, flag: string): number {
  if (a !== undefined && b !== undefined && a !== b)
    throw new UsageError("bad-shape", `${flag} and its GEMM alias name different sizes (${a}, ${b})`);
  const v = a ?? b;
  if (v === undefined)
    throw new UsageError("bad-shape", `ovl emit mlp needs ${flag}; e.g. --tokens 8192 --hidden 4096 --intermediate 1792 --world 8`);
  return v;
}

function tileOf(tile: string | undefined): { BM: number; BN: number; BK: number } | undefined {
  if (tile === undefined) return undefined;
  const m = /^(\d+)x(\d+)x(\d+)$/.exec(tile);
  if (m === null) throw new UsageError("usage", `--tile '${tile}' is not BMxBNxBK (e.g. 128x128x64)`);
  return { BM: Number(m[1]), BN: Number(m[2]), BK: Number(m[3]) };
}

/** Compile the flags' MLP chain into `outDir` (`chain.json`, `up/`, `down/`). */
export async function emitMlpCommand(f: MlpFlags, outDir: string): Promise<CommandOutput> {
  const M = size(f.tokens, f.m, "--tokens (or --m)");
  const hidden = size(f.hidden, f.k, "--hidden (or --k)");
  const intermediate = size(f.intermediate, f.n, "--intermediate (or --n)");
  const mesh = parseMesh(f);
  if (mesh.length !== 1) throw new UsageError("unsupported", "ovl emit mlp runs on a flat world (--world), not a mesh");
  const world = mesh[0]!;
  const tile = tileOf(f.tile);
  const dtype = f.dtype ?? DEFAULT_DTYPE;
  const name = `mlp_t${M}_h${hidden}_i${intermediate}${dtypeSuffix(dtype, "_")}_w${world}`;
  const r = await compileMlp({
    name,
    world,
    M,
    hidden,
    intermediate,
    split: f.split ?? 1,
    ...(tile ? { upTile: tile, downTile: tile } : {}),
    ...(f.target === undefined ? {} : { target: f.target }),
    options: { dtype },
  });
  const dir = resolve(outDir);
  const files: string[] = [];
  for (const s of r.stages) files.push(...writeEmitted(join(dir, s.dir), s.result).files);
  const chainPath = join(dir, "chain.json");
  writeFileSync(chainPath, `${JSON.stringify(r.chain, null, 2)}\n`);
  files.push(chainPath);
  const stages = r.stages.map((s) => ({
    name: s.result.manifest.name,
    dir: join(dir, s.dir),
    operator: s.result.manifest.reference.operator,
    kernels: s.result.manifest.kernels.map((k) => ({ name: k.name, stream: k.stream, template: k.template.kind })),
  }));
  return {
    json: { name, dir, chain: chainPath, files, world, dtype, mlp: { tokens: M, hidden, intermediate }, stages },
    lines: [
      `${name}: X [${M}, ${hidden}] gathered on ${world} ranks → silu(X W_gate) * (X W_up) [${M}, ${intermediate}] per rank → @ W_down, reduce-scattered${dtypeSuffix(dtype, ", ")}`,
      ...stages.map((s) => `  stage ${s.name} (${s.operator}): ${s.kernels.map((k) => k.name).join(", ")}`),
      ...files.map((x) => `wrote ${x}`),
      `run it: python -m ovl_runtime chain ${chainPath}    (every stage emulated on the CPU, checked end to end)`,
    ],
  };
}

/** The flags of `ovl emit ag-gemm-silu`: the MLP's first stage alone (as the torch API's kernel library compiles it). */
export interface AgGemmSiluFlags extends MlpFlags {
  backend?: string;
}

/** Compile the MLP's first stage alone (AllGather + gate/up GEMM + SiLU-mul) into `outDir` (`manifest.json` and its kernel). */
export async function emitAgGemmSiluCommand(f: AgGemmSiluFlags, outDir: string): Promise<CommandOutput> {
  if (f.backend !== undefined && f.backend !== "copy-engine")
    throw new UsageError("unsupported", "ag-gemm-silu gathers X with copy-engine transfers only; drop --backend");
  const M = size(f.tokens, f.m, "--tokens (or --m)");
  const hidden = size(f.hidden, f.k, "--hidden (or --k)");
  const intermediate = size(f.intermediate, f.n, "--intermediate (or --n)");
  const mesh = parseMesh(f);
  if (mesh.length !== 1) throw new UsageError("unsupported", "ovl emit ag-gemm-silu runs on a flat world (--world), not a mesh");
  const world = mesh[0]!;
  const tile = tileOf(f.tile);
  const dtype = f.dtype ?? DEFAULT_DTYPE;
  const name = `ag_gemm_silu_t${M}_h${hidden}_i${intermediate}${dtypeSuffix(dtype, "_")}_w${world}`;
  const plan = planSignals(
    allGatherSwizzle({
      tensor: { name: "X", shape: [M, hidden], dtype },
      axis: 0,
      mesh: [world],
      split: f.split ?? 2,
      side: "push",
    }),
  );
  const result = await compile(
    withSiluMulDefaults({
      name,
      kind: "ag-gemm-silu",
      plan,
      body: gemmSiluMulBody(),
      problem: { M, N: intermediate, K: hidden },
      ...(tile ? { tile } : {}),
      options: { dtype },
    }),
  );
  const { dir, manifest, files } = writeEmitted(outDir, result, plan);
  return {
    json: { name, dir, manifest, files, world, dtype, mlp: { tokens: M, hidden, intermediate } },
    lines: [
      `${name}: X [${M}, ${hidden}] gathered on ${world} ranks → silu(X W_gate) * (X W_up) [${M}, ${intermediate}] per rank${dtypeSuffix(dtype, ", ")}`,
      ...files.map((x) => `wrote ${x}`),
      `run it: ovl run ${manifest} --emulate`,
    ],
  };
}
