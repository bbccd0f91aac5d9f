// The compute configurations worth timing on the device for one operator's per-rank GEMM: the
// tuned table's pick (what `ovl emit` compiles today), the configurations that won at the
// table's nearest measured shapes, the pick's neighbours (one setting changed), and the compute
// model's best ranked configurations. An
// on-device tuner (the runtime's `_tune`) times them and keeps the fastest; it asks here rather
// than re-implementing the table lookup or the model. Every candidate is compiled in memory
// exactly as `ovl emit` with its flags would compile it, so a configuration the operator cannot
// take (a tile off its chunks' row blocks, a body rows mode cannot run) is refused here, with the
// compiler's reason, instead of failing on the GPU machine.
import { join } from "node:path";
import type { ChunkPlan } from "@ovl/chunk-plan";
import { TARGETS, type TargetName } from "@ovl/primitives";
import {
  computeKey,
  computeMisfit,
  computeModel,
  predictComputeMs,
  rankComputeConfigs,
  type ComputeConfig,
  type ComputeModel,
  type ComputeRole,
  type RankedCompute,
} from "@ovl/sim";
import {
  candidateTables,
  compileOperator,
  DEFAULT_COMM_SMS,
  describeTable,
  lookupComputeConfig,
  resolveCompute,
  tritonBackend,
  type BuiltinBodyName,
  type ComputeConfigEntry,
  type EmitResult,
} from "@ovl/tlx-emitter";
import { decideCommSms } from "./comm-sms.js";
import { problemOperator, type EmitSources } from "./commands/emit.js";
import { rowsRequest } from "./commands/rows.js";
import { writeEmitted } from "./commands/write-emitted.js";
import { UsageError } from "./errors.js";
import type { Problem } from "./problem.js";

/** The operators whose compute a tuned table decides and whose bodies the compute model prices. */
export const CANDIDATE_OPERATORS = ["ag-gemm", "gemm-rs"] as const;

/** Candidates listed when `topK` is not given: the tuner's default (`OVL_TUNE_TOP_K`). */
export const DEFAULT_TOP_K = 8;

/** Where a candidate comes from. */
export type CandidateSource = "table" | "default" | "nearest" | "neighbour" | "model";

/** One configuration to time, in the order the tuner should time them. */
export interface ComputeCandidate {
  readonly rank: number;
  readonly source: CandidateSource;
  /** `computeKey`: `gemm_tma_persistent_flat 128x256x64 g4 s3 w8`. */
  readonly key: string;
  readonly config: ComputeConfig;
  /** The compute model's prediction (ms) on the SMs the kernel gets. */
  readonly predictedMs: number;
  /** The `ovl emit` flags that compile exactly this configuration. */
  readonly flags: readonly string[];
  /** `nearest`: the measured shape whose winner it is, and its distance from the query (`lookupComputeConfig`'s). */
  readonly entry?: { readonly M: number; readonly N: number; readonly K: number; readonly distance: number };
  /** With `out`: the folder its compiled operator was written to. */
  readonly dir?: string;
}

/** What `computeCandidates` answers. */
export interface CandidateList {
  readonly operator: (typeof CANDIDATE_OPERATORS)[number];
  readonly role: ComputeRole;
  readonly target: TargetName;
  /** Programs the compute kernel runs on: the target's SMs less the push kernel's (GEMM+RS over SM pushes). */
  readonly gridSms: number;
  readonly commSms?: number;
  /** How the table pick was decided: the table's entry (exact or nearest) or the default tile, and why. */
  readonly table: string;
  readonly candidates: readonly ComputeCandidate[];
  /** Configurations tried and refused (misfit or refused by the compiler), with the reason. */
  readonly refused: readonly { readonly key: string; readonly source: CandidateSource; readonly reason: string }[];
}

/** Options of {@link computeCandidates}. */
export interface CandidateOptions {
  readonly target: TargetName;
  /** How many candidates at most, the table pick included (default 8). */
  readonly topK?: number;
  /** Of them, at most this many winners of the table's nearest other shapes (default 2). */
  readonly nearest?: number;
  /** Of them, at most this many neighbours of the table's pick (`neighbours`; default 3). */
  readonly neighbours?: number;
  /** `--comm-sms` as `ovl emit` takes it (GEMM+RS over SM pushes). */
  readonly commSms?: number;
  /** `--any-rows` (ag-gemm, gemm-rs): candidates must compile for every row count up to `maxRows`. */
  readonly anyRows?: { readonly minRows?: number; readonly maxRows?: number };
  /**
   * Write each candidate's compiled operator (kernels, manifest, plan: what `ovl emit` with its
   * flags writes) into `<out>/c<rank>`, so a tuner need not compile it a second time.
   */
  readonly out?: string;
}

/** The `ovl emit` flags of a configuration. */
export function configFlags(c: ComputeConfig): string[] {
  return [
    "--tile",
    `${c.BM}x${c.BN}x${c.BK}`,
    "--group-m",
    String(c.groupM),
    "--num-warps",
    String(c.numWarps),
    "--num-stages",
    String(c.numStages),
    "--body",
    c.body,
  ];
}

/** The configuration the compute kernel of a compiled operator realises (its manifest's launch, constexprs and body). */
export function realisedConfig(r: EmitResult): ComputeConfig {
  const k = r.manifest.kernels.find((x) => x.template.kind === "local-consumer" || x.template.kind === "local-producer");
  if (k === undefined) throw new UsageError("unsupported", `${r.manifest.name}: no compute kernel in the compiled manifest`);
  const c = k.constexprs;
  const body = String(k.template.params.body ?? "").replace(/\.py$/, "");
  return {
    body,
    BM: Number(c.BLOCK_M),
    BN: Number(c.BLOCK_N),
    BK: Number(c.BLOCK_K),
    groupM: Number(c.GROUP_M),
    numStages: k.numStages,
    numWarps: k.numWarps,
  };
}

/** The problem with `c` named on it as `ovl emit --tile --group-m` would, and the sources with its body, warps and stages. */
function pinned(p: Problem, sources: EmitSources, c: ComputeConfig): { p: Problem; sources: EmitSources } {
  return {
    p: { ...p, tile: { BM: c.BM, BN: c.BN, BK: c.BK }, groupSizeM: c.groupM, named: { tile: true, groupM: true } },
    sources: { ...sources, body: c.body as BuiltinBodyName, numWarps: c.numWarps, numStages: c.numStages },
  };
}

/** A candidate compiled in memory: its realised configuration, and what `ovl emit` would write for it. */
interface Compiled {
  readonly config: ComputeConfig;
  readonly result: EmitResult;
  readonly plan: ChunkPlan;
}

/** Compile `p` in memory as `ovl emit` would (its rows range and crossover per its own tile), or say why not. */
async function compiles(p: Problem, sources: EmitSources, o: CandidateOptions): Promise<Compiled | string> {
  try {
    const rows = o.anyRows === undefined ? {} : { rows: rowsRequest(p, o.anyRows, o.target) };
    const input = problemOperator(p, { ...sources, ...rows });
    const r = await compileOperator(input, tritonBackend, { target: o.target });
    return { config: realisedConfig(r.result), result: r.result, plan: input.plan };
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  }
}

/**
 * The model's picks in the order worth measuring: the best configuration of every tile footprint
 * (BM×BN: what sets the waves and the operand reuse, where the model's ranking is most
 * informative), fastest first, then the best of every other kernel shape (body, tile, warps);
 * among equal predictions the shallowest ring (the model cannot tell deeper rings apart).
 */
export function modelPicks(ranked: readonly RankedCompute[]): RankedCompute[] {
  const best = (key: (c: ComputeConfig) => string): RankedCompute[] => {
    const out = new Map<string, RankedCompute>();
    for (const r of ranked) {
      const k = key(r.config);
      const b = out.get(k);
      const tie = b !== undefined && r.predictedMs <= b.predictedMs * (1 + 1e-9) && r.config.numStages < b.config.numStages;
      if (b === undefined || tie) out.set(k, r);
    }
    return [...out.values()].sort((a, b) => a.predictedMs - b.predictedMs);
  };
  const tiles = best((c) => `${c.BM}x${c.BN}`);
  const shapes = best((c) => `${c.body} ${c.BM}x${c.BN}x${c.BK} w${c.numWarps}`);
  return [...tiles, ...shapes.filter((r) => !tiles.includes(r))];
}

/** The bodies that differ only in how the persistent grid's last wave is cut: whole tiles, or stream-K along K. */
const LAST_WAVE_TWIN: Readonly<Record<string, string>> = {
  gemm_tma_persistent_flat: "gemm_tma_persistent_streamk",
  gemm_tma_persistent_streamk: "gemm_tma_persistent_flat",
};

/**
 * The configurations one setting away from `c`, in the order worth measuring: its last-wave twin
 * body (flat ↔ stream-K), the other group sizes of 4, 8 and 16, one ring stage fewer and one more,
 * and the transposed tile. Off the measured shapes the table's pick is a guess from a nearby
 * shape, and what moves with the shape (the waves, the L2 reuse of a group, the K loop's depth) is
 * what these change. Whether each fits the GPU and compiles is checked as for any candidate.
 */
export function neighbours(c: ComputeConfig): ComputeConfig[] {
  const out: ComputeConfig[] = [];
  const twin = LAST_WAVE_TWIN[c.body];
  if (twin !== undefined) out.push({ ...c, body: twin });
  for (const groupM of [4, 8, 16]) if (groupM !== c.groupM) out.push({ ...c, groupM });
  for (const numStages of [c.numStages - 1, c.numStages + 1]) if (numStages >= 2) out.push({ ...c, numStages });
  if (c.BM !== c.BN) out.push({ ...c, BM: c.BN, BN: c.BM });
  return out;
}

/** The table's other entries of `op` in `lookupComputeConfig`'s order of distance from the query (its metric, its ties). */
function nearestEntries(
  target: TargetName,
  op: "ag-gemm" | "gemm-rs",
  p: Problem,
): { readonly entry: ComputeConfigEntry; readonly distance: number }[] {
  const out: { entry: ComputeConfigEntry; distance: number }[] = [];
  for (const table of candidateTables(target)) {
    let rest = table.entries.filter((e) => e.op === op);
    for (;;) {
      const hit = lookupComputeConfig({ ...table, entries: rest }, { op, M: p.M, N: p.N, K: p.K, dtype: "bf16" });
      if (hit === undefined) break;
      out.push({ entry: hit.entry, distance: hit.distance });
      rest = rest.filter((e) => e !== hit.entry);
    }
  }
  return out;
}

/**
 * The candidates of `p` (ag-gemm or gemm-rs): first the table's pick (or the default tile where
 * the table has none that fits), then up to `nearest` winners of the table's nearest other
 * shapes, up to `neighbours` of the pick's neighbours (`neighbours`), then the model's picks
 * (`modelPicks`, ranked on the SMs the kernel gets), until `topK` compiled; configurations that do not fit or that the compiler refuses are listed in `refused`.
 * @throws {UsageError} an operator other than ag-gemm and gemm-rs; a table pick that does not compile.
 */
export async function computeCandidates(p: Problem, o: CandidateOptions): Promise<CandidateList> {
  if (p.operator !== "ag-gemm" && p.operator !== "gemm-rs")
    throw new UsageError(
      "unsupported",
      `candidates are timed for the operators whose compute a tuned table decides and the model prices: ${CANDIDATE_OPERATORS.join(", ")}, not ${p.operator}`,
    );
  if (p.named.tile || p.named.groupM) throw new UsageError("usage", "candidates vary the tile and grouping: drop --tile and --group-m");
  const topK = o.topK ?? DEFAULT_TOP_K;
  const role: ComputeRole = p.operator === "ag-gemm" ? "consumer" : "producer";
  const comm = decideCommSms(p, o.commSms, o.target);
  const commSms = p.operator === "gemm-rs" && p.backend === "sm" ? (comm?.commSms ?? DEFAULT_COMM_SMS) : undefined;
  const gridSms = TARGETS[o.target].smCount - (commSms ?? 0);
  const model: ComputeModel = { ...computeModel(o.target), smCount: gridSms };
  const problem = { role, M: p.M, N: p.N, K: p.K, dtype: "bf16" as const };
  const sources: EmitSources = { target: o.target, ...(comm === undefined ? {} : { commSms: comm.commSms }) };

  // The table pick: compile() of the operator with no tile, exactly as `ovl emit` without --tile.
  const { choice } = resolveCompute(problemOperator(p, sources), { target: o.target });
  const table =
    choice.source === "table"
      ? `${describeTable(choice)}, ${choice.match === "exact" ? "exact shape" : "nearest shape"} (M=${choice.entry.M} N=${choice.entry.N} K=${choice.entry.K})`
      : choice.source === "default"
        ? `default tile: ${choice.reason}`
        : "named";
  const pick = await compiles(p, sources, o);
  if (typeof pick === "string") throw new UsageError("unsupported", `${p.operator} does not compile at this shape: ${pick}`);

  const candidates: ComputeCandidate[] = [];
  const refused: { key: string; source: CandidateSource; reason: string }[] = [];
  const seen = new Set<string>();
  const predicted = (c: ComputeConfig): number => {
    try {
      return predictComputeMs(problem, c, model);
    } catch {
      return Number.NaN; // a body the model does not know: measured all the same
    }
  };
  const accept = (source: CandidateSource, got: Compiled, entry?: ComputeCandidate["entry"]) => {
    const rank = candidates.length;
    const c = got.config;
    const dir = o.out === undefined ? undefined : writeEmitted(join(o.out, `c${rank}`), got.result, got.plan).dir;
    candidates.push({
      rank,
      source,
      key: computeKey(c),
      config: c,
      predictedMs: predicted(c),
      flags: configFlags(c),
      ...(entry === undefined ? {} : { entry }),
      ...(dir === undefined ? {} : { dir }),
    });
  };
  seen.add(computeKey(pick.config));
  accept(choice.source === "table" ? "table" : "default", pick);

  // Then the other sources; each configuration compiled as its flags would compile it.
  const nearest = nearestEntries(o.target, p.operator, p).map(({ entry: e, distance }) => ({
    source: "nearest" as const,
    config: { body: e.body, BM: e.BM, BN: e.BN, BK: e.BK, groupM: e.groupM, numStages: e.numStages, numWarps: e.numWarps },
    entry: { M: e.M, N: e.N, K: e.K, distance },
  }));
  const ranked = rankComputeConfigs(problem, { model }).ranked;
  const fromModel = modelPicks(ranked).map((r) => ({ source: "model" as const, config: r.config, entry: undefined }));
  const near = neighbours(pick.config).map((c) => ({ source: "neighbour" as const, config: c, entry: undefined }));
  const queue = [...nearest, ...near, ...fromModel];
  const cap: Partial<Record<CandidateSource, number>> = { nearest: o.nearest ?? 2, neighbour: o.neighbours ?? 3 };
  const taken: Partial<Record<CandidateSource, number>> = {};
  // Bounded: a shape whose every configuration is refused must not compile the whole space.
  let attempts = 0;
  for (const q of queue) {
    if (candidates.length >= topK || attempts >= 4 * topK) break;
    const key = computeKey(q.config);
    if (seen.has(key)) continue;
    if ((taken[q.source] ?? 0) >= (cap[q.source] ?? Number.POSITIVE_INFINITY)) continue;
    seen.add(key);
    const misfit = computeMisfit(q.config, "bf16", model);
    if (misfit !== undefined) {
      refused.push({ key, source: q.source, reason: misfit });
      continue;
    }
    attempts += 1;
    const pin = pinned(p, sources, q.config);
    const got = await compiles(pin.p, pin.sources, o);
    if (typeof got === "string") {
      refused.push({ key, source: q.source, reason: got });
      continue;
    }
    if (computeKey(got.config) !== key) {
      refused.push({ key, source: q.source, reason: `compiled as ${computeKey(got.config)}` });
      continue;
    }
    taken[q.source] = (taken[q.source] ?? 0) + 1;
    accept(q.source, got, q.entry);
  }
  return {
    operator: p.operator,
    role,
    target: o.target,
    gridSms,
    ...(commSms === undefined ? {} : { commSms }),
    table,
    candidates,
    refused,
  };
}
