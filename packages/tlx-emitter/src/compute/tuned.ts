// The compute configuration of an operator that names no tile: the tuned table's entry for
// its shape (configs.ts), applied to the tile, L2 grouping, warps, stages and, for ovl's own
// bodies, the body variant; what the operator names itself always wins.
import type { ChunkPlan } from "@ovl/chunk-plan";
import { DEFAULT_TARGET, type TargetName } from "@ovl/primitives";
import { clusterFits } from "../backends/tlx/compute.js";
import { builtinBody, type BuiltinBodyName } from "../core/builtin.js";
import {
  candidateTables,
  lookupFirst,
  TUNED_OPERATORS,
  type ComputeConfigEntry,
  type ComputeConfigTable,
  type TunedOperator,
} from "./configs.js";
import type { Operator, OperatorInput } from "../core/operator.js";
import { operatorDefinition } from "../operators/index.js";

/** How an operator's compute configuration was decided. */
export type ComputeChoice =
  | { readonly source: "explicit" }
  | {
      readonly source: "table";
      readonly match: "exact" | "nearest";
      readonly entry: ComputeConfigEntry;
      /** The target whose table gave the entry. */
      readonly target: TargetName;
      /** The target compile() was asked for: another than `target` when its table is borrowed. */
      readonly requested: TargetName;
    }
  | { readonly source: "default"; readonly reason: string };

/**
 * Which table a table choice read, for people: `h100 table`, or
 * `h200: no own ag-moe entries, using h100's` when the requested target borrowed another's.
 */
export function describeTable(choice: {
  readonly target: TargetName;
  readonly requested: TargetName;
  readonly entry: { readonly op: string };
}): string {
  return choice.requested === choice.target
    ? `${choice.target} table`
    : `${choice.requested}: no own ${choice.entry.op} entries, using ${choice.target}'s`;
}

/** Options of {@link resolveCompute}. */
export interface ResolveComputeOptions {
  /** Target whose table is read (default: the default target, whose table may be borrowed). */
  readonly target?: TargetName;
  /** A table to use instead of the package's; `null`: none (the default tile). */
  readonly table?: ComputeConfigTable | null;
  /**
   * The backend the configuration is for (default `triton`): `tlx` takes the entry's `tlx`
   * configuration (tile, grouping, consumer schedule, stages) and keeps the body.
   */
  readonly backend?: "triton" | "tlx";
}

/** The built-in body `op.body` is (by its text), if any, of the bodies that compute its operator (its registry entry's). */
export function builtinOf(op: OperatorInput): BuiltinBodyName | undefined {
  return operatorDefinition(op.kind).compute.bodies?.find((n) => builtinBody(n).source === op.body.source);
}

/** The row granularity of `plan`'s transfers of `tensor`: the gcd of every row offset and count. */
function rowGranularity(plan: ChunkPlan): number {
  const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));
  let g = 0;
  for (const r of plan.ranks)
    for (const s of r.streams)
      for (const x of s) for (const region of [x.src, x.dst]) g = gcd(gcd(g, region.offsets[0] ?? 0), region.sizes[0] ?? 0);
  return g;
}

/**
 * `op` with every compute knob decided. An explicit `tile` keeps the operator as written
 * (its `groupM`, warps and stages, or their defaults). Without one, the tuned entry of its
 * shape (`lookupComputeConfig` in the target's table) gives the tile, `groupM`, warps and
 * stages that the operator does not name, and swaps a built-in body for the entry's variant
 * of the same family (a user's body is kept); with no usable entry, the default tile
 * 128×256×64. A GEMM+RS plan whose chunks are not whole row blocks of the tuned tile keeps the
 * default tile too.
 * @throws {EmitError} `bad-param` for an ag-grouped-gemm without a tile (its routing is per m-block).
 */
export function resolveCompute(op: OperatorInput, options: ResolveComputeOptions = {}): { op: Operator; choice: ComputeChoice } {
  if (op.tile !== undefined) return { op: { ...op, tile: op.tile }, choice: { source: "explicit" } };
  const def = operatorDefinition(op.kind);
  const untuned = def.compute.defaultTile(op);
  const fallback = (reason: string) => ({ op: { ...op, tile: { ...untuned } }, choice: { source: "default" as const, reason } });
  const kind = op.kind;
  // The tables' schema names the operators it holds; an entry claiming tuning beyond it has none to read.
  if (!def.compute.tuned || !(TUNED_OPERATORS as readonly string[]).includes(kind))
    return fallback(`no tuned configurations of ${kind} operators`);
  const target = options.target ?? DEFAULT_TARGET.name;
  const tables = candidateTables(target, options.table);
  const first = tables[0];
  if (first === undefined) return fallback(`no tuned table for ${target}`);
  const dtype = op.options?.dtype ?? "bf16";
  const routing = op.kind === "ag-moe" && op.moe !== undefined ? { experts: op.moe.experts, topk: op.moe.topk } : {};
  const hit = lookupFirst(tables, { op: kind as TunedOperator, ...op.problem, dtype, ...routing });
  if (hit === undefined) return fallback(`the ${first.target} table has no ${op.kind} entry for ${dtype}`);
  const { table, match: found } = hit;
  const e = found.entry;
  if (op.kind === "gemm-rs" && rowGranularity(op.plan) % e.BM !== 0)
    return fallback(`the plan's chunks are not whole ${e.BM}-row blocks of the tuned tile`);
  if (options.backend === "tlx" && op.kind === "ag-moe") return fallback("the TLX backend does not realise ag-moe");
  if (options.backend === "tlx") {
    const t = e.tlx;
    if (t === undefined) return fallback(`the ${table.target} table's ${op.kind} entry has no TLX configuration`);
    if (op.kind === "gemm-rs" && rowGranularity(op.plan) % t.BM !== 0)
      return fallback(`the plan's chunks are not whole ${t.BM}-row blocks of the tuned TLX tile`);
    const groupM = op.groupM ?? t.groupM;
    // A clustered pick pairs m-blocks and groups pairs of rows: where this operator's m-blocks
    // or its own GROUP_M do not pair up (a nearest-shape entry, say), its kernel runs unclustered.
    // So does a GEMM+RS whose partials go by SM pushes: beside the push kernel's SMs fewer 2-SM
    // clusters co-reside than the grid holds, and the last run a second round (the clustered
    // picks, measured alone, ran 1.32-1.66x slower end to end there on two and four H200s:
    // evidence: `results/runs/deferred-notify-h200-2026-11-28`).
    const paired = clusterFits(2, Math.ceil(op.problem.M / t.BM), groupM) && op.options?.backend !== "sm";
    const ws = {
      consumerSchedule: t.consumerSchedule,
      stages: t.stages,
      ...(t.epilogueSplit === undefined ? {} : { epilogueSplit: t.epilogueSplit }),
      ...(t.notifier === undefined ? {} : { notifier: t.notifier }),
      ...(t.clusterM === 2 && paired ? { clusterM: 2 } : {}),
    };
    const tunedTlx: Operator = {
      ...op,
      tile: { BM: t.BM, BN: t.BN, BK: t.BK },
      groupM,
      warpSpecialization: op.warpSpecialization ?? ws,
    };
    return { op: tunedTlx, choice: { source: "table", match: found.match, entry: e, target: table.target, requested: target } };
  }
  const family = def.compute.bodies ?? [];
  const body = builtinOf(op) !== undefined && family.includes(e.body) ? builtinBody(e.body) : op.body;
  const tuned: Operator = {
    ...op,
    body,
    tile: { BM: e.BM, BN: e.BN, BK: e.BK },
    groupM: op.groupM ?? e.groupM,
    options: { ...op.options, numWarps: op.options?.numWarps ?? e.numWarps, numStages: op.options?.numStages ?? e.numStages },
  };
  return { op: tuned, choice: { source: "table", match: found.match, entry: e, target: table.target, requested: target } };
}
