// What every planning command is asked about: an operator, a shape (an MLP shape of
// TileLink Table 4 by name, or explicit M, N, K), a mesh, a template and its knobs. This
// module turns raw flags into a checked `Problem`, with messages that say what to type.
import { MLP_SHAPES, type MlpShapeName } from "@ovl/sim";
import type { OperatorDtype } from "@ovl/tlx-emitter";
import { DEFAULT_DTYPE, dtypeSuffix } from "./dtype.js";
import { UsageError } from "./errors.js";
import { closest, unknownNameMessage } from "./suggest.js";

/** Operators of the CLI: the two overlapped GEMMs, and the collectives (plan / validate only). */
export const OPERATORS = ["ag-gemm", "gemm-rs", "gemm-ar", "a2a-gemm", "all-gather", "reduce-scatter", "all-reduce", "all-to-all"] as const;
/** An operator name. */
export type Operator = (typeof OPERATORS)[number];
/** Operators that fuse a GEMM with a collective (emit, simulate, tune, demo). */
export const GEMM_OPERATORS = ["ag-gemm", "gemm-rs", "gemm-ar"] as const;
/** A fused GEMM operator. */
export type GemmOperator = (typeof GEMM_OPERATORS)[number];
/** Operators `ovl emit` builds from flags: the fused GEMMs and AllToAll+GEMM (emit only: the simulator has no AllToAll model). */
export const EMIT_OPERATORS = [...GEMM_OPERATORS, "a2a-gemm"] as const;
/** Plan templates by their CLI name. */
export const TEMPLATES = ["ring", "swizzle", "hierarchical", "direct", "tilewise"] as const;
/** A template name. */
export type TemplateName = (typeof TEMPLATES)[number];
/** Transfer backends (`nvshmem`: ag-gemm, gemm-rs and the partitioned gemm-ar, emitted only: the simulator has no NVSHMEM model). */
export const BACKENDS = ["copy-engine", "sm", "nvshmem"] as const;
/** A backend name. */
export type Backend = (typeof BACKENDS)[number];

/** Templates each operator accepts, the first being its default. */
export const OPERATOR_TEMPLATES: Readonly<Record<Operator, readonly TemplateName[]>> = {
  "ag-gemm": ["swizzle", "ring", "hierarchical", "direct"],
  "all-gather": ["swizzle", "ring", "hierarchical", "direct"],
  // hierarchical: emitted over --backend nvshmem (its node sums need the slab-sum kernel between the stages).
  "gemm-rs": ["direct", "ring", "hierarchical"],
  // gemm-ar: direct = the partitioned AllReduce (direct ReduceScatter, swizzled AllGather); tilewise = DistFuse's.
  "gemm-ar": ["direct", "tilewise"],
  "reduce-scatter": ["direct", "ring"],
  "all-reduce": ["ring", "direct"],
  "all-to-all": ["direct"],
  "a2a-gemm": ["direct"],
};

/** A GEMM tile: output `BM × BN`, K step `BK`. */
export interface Tile {
  readonly BM: number;
  readonly BN: number;
  readonly BK: number;
}

/** A checked problem: everything needed to build its plan, schedule and kernels. */
export interface Problem {
  readonly operator: Operator;
  /** The MLP shape's name when given by name. */
  readonly shapeName: MlpShapeName | undefined;
  /** The per-rank GEMM: `A[M×K] · B[K×N]`; for collectives the moved tensor is `[M, K]` (all-gather) or `[M, N]`. */
  readonly M: number;
  readonly N: number;
  readonly K: number;
  /** Element type of the operator's tensors (`--dtype`; default bf16). */
  readonly dtype: OperatorDtype;
  readonly mesh: readonly number[];
  readonly world: number;
  readonly template: TemplateName;
  readonly side: "push" | "pull";
  readonly split: number;
  readonly backend: Backend;
  /** The tile of the plan, the schedule and the simulator (`--tile`, else 128×256×64). */
  readonly tile: Tile;
  readonly groupSizeM: number;
  readonly numSms: number;
  /**
   * Which compute knobs the flags named. `ovl emit` hands an operator whose tile was not
   * named to `compile()` without one, so the tuned configuration of its shape decides tile,
   * L2 grouping, warps, stages and body variant (a named `--group-m` is kept).
   */
  readonly named: { readonly tile: boolean; readonly groupM: boolean };
}

/** Flags as commander hands them over (every one optional). */
export interface ProblemFlags {
  shape?: string;
  m?: number;
  n?: number;
  k?: number;
  /** `--dtype`, already checked by its parser (`parseDtypeFlag`). */
  dtype?: OperatorDtype;
  world?: number;
  mesh?: string;
  split?: number;
  template?: string;
  side?: string;
  backend?: string;
  tile?: string;
  groupM?: number;
  sms?: number;
}

const SHAPE_NAMES = Object.keys(MLP_SHAPES) as MlpShapeName[];
const EXAMPLE = "ovl plan ag-gemm --shape MLP-1 --world 8";

/** Parse an operator name, suggesting the closest when it is a typo. */
export function parseOperator(input: string, allowed: readonly Operator[] = OPERATORS): Operator {
  if ((allowed as readonly string[]).includes(input)) return input as Operator;
  if ((OPERATORS as readonly string[]).includes(input)) {
    throw new UsageError(
      "unsupported",
      `this command takes ${allowed.join(" or ")}, not '${input}' (plan and validate take every operator)`,
    );
  }
  throw new UsageError("unknown-operator", unknownNameMessage("operator", input, allowed));
}

/** Parse `--mesh 2x8` (levels outermost first) or `--world N` into mesh levels. */
export function parseMesh(flags: Pick<ProblemFlags, "world" | "mesh">): number[] {
  if (flags.mesh !== undefined) {
    if (!/^[1-9][0-9]*(x[1-9][0-9]*)*$/.test(flags.mesh)) {
      throw new UsageError(
        "bad-mesh",
        `--mesh '${flags.mesh}' is not a mesh; write the levels outermost first, e.g. --mesh 8 or --mesh 2x4 (2 nodes × 4 GPUs)`,
      );
    }
    const mesh = flags.mesh.split("x").map(Number);
    const world = mesh.reduce((a, b) => a * b, 1);
    if (flags.world !== undefined && flags.world !== world) {
      throw new UsageError("bad-mesh", `--world ${flags.world} disagrees with --mesh ${flags.mesh} (${world} ranks); give one of them`);
    }
    return mesh;
  }
  return [flags.world ?? 8];
}

function parseTile(text: string | undefined): Tile {
  if (text === undefined) return { BM: 128, BN: 256, BK: 64 };
  const m = /^(\d+)x(\d+)x(\d+)$/.exec(text);
  const dims = m === null ? [] : [Number(m[1]), Number(m[2]), Number(m[3])];
  if (dims.length !== 3 || dims.some((d) => d < 16 || d > 256 || (d & (d - 1)) !== 0)) {
    throw new UsageError(
      "bad-shape",
      `--tile '${text}' is not a tile; write BMxBNxBK with powers of two in 16..256, e.g. --tile 128x256x64`,
    );
  }
  return { BM: dims[0]!, BN: dims[1]!, BK: dims[2]! };
}

function pick<T extends string>(what: string, flag: string, input: string | undefined, allowed: readonly T[], fallback: T): T {
  if (input === undefined) return fallback;
  if ((allowed as readonly string[]).includes(input)) return input as T;
  throw new UsageError(what === "template" ? "unknown-template" : "usage", `${unknownNameMessage(what, input, allowed)} (${flag})`);
}

/** The GEMM dimensions of `operator` for an MLP shape on `world` ranks (TileLink Table 4). */
export function mlpProblem(operator: Operator, name: MlpShapeName, world: number): { M: number; N: number; K: number } {
  const { S, H, I } = MLP_SHAPES[name];
  if (I % world !== 0) {
    const ok = [2, 4, 8, 16].filter((w) => I % w === 0 && S % w === 0);
    throw new UsageError(
      "bad-mesh",
      `${name} (I=${I}) does not split evenly over ${world} ranks: use --world ${ok.join(", ")} (or give --m --n --k)`,
    );
  }
  // AG+GEMM: A[S × H] gathered times B[H × I/W]; GEMM+RS and GEMM+AR: A[S × I/W] times B[I/W × H].
  if (
    operator === "gemm-rs" ||
    operator === "gemm-ar" ||
    operator === "reduce-scatter" ||
    operator === "all-reduce" ||
    operator === "all-to-all"
  ) {
    return { M: S, N: H, K: I / world };
  }
  return { M: S, N: I / world, K: H };
}

function resolveShape(
  operator: Operator,
  flags: ProblemFlags,
  world: number,
): { shapeName: MlpShapeName | undefined; M: number; N: number; K: number } {
  const explicit = [flags.m, flags.n, flags.k];
  if (flags.shape !== undefined) {
    if (explicit.some((v) => v !== undefined)) throw new UsageError("bad-shape", "give either --shape or --m --n --k, not both");
    const name = SHAPE_NAMES.find((s) => s === flags.shape);
    if (name === undefined) {
      const near = closest(flags.shape, SHAPE_NAMES);
      throw new UsageError(
        "unknown-shape",
        near !== undefined
          ? `unknown shape '${flags.shape}'; did you mean '${near}'? (or give --m --n --k)`
          : `unknown shape '${flags.shape}'; use one of: ${SHAPE_NAMES.join(", ")}, or give --m --n --k`,
      );
    }
    return { shapeName: name, ...mlpProblem(operator, name, world) };
  }
  if (explicit.every((v) => v === undefined)) return { shapeName: "MLP-1", ...mlpProblem(operator, "MLP-1", world) };
  if (explicit.some((v) => v === undefined)) {
    throw new UsageError("bad-shape", `give all of --m, --n and --k (the per-rank GEMM A[M×K]·B[K×N]), or a named shape: --shape MLP-1`);
  }
  return { shapeName: undefined, M: flags.m!, N: flags.n!, K: flags.k! };
}

/**
 * Check flags against `operator` and turn them into a {@link Problem}. Defaults: MLP-1 on
 * 8 ranks, the operator's first template, push side, split 2, copy engine, 128×256×64
 * tiles grouped by 8 on 132 SMs.
 * @throws {UsageError} naming the flag and what to type instead.
 */
export function resolveProblem(operator: Operator, flags: ProblemFlags): Problem {
  const mesh = parseMesh(flags);
  const world = mesh.reduce((a, b) => a * b, 1);
  if (world < 2)
    throw new UsageError("bad-mesh", `a mesh of ${world} rank has nothing to communicate: use --world 2 or more (e.g. ${EXAMPLE})`);
  const templates = OPERATOR_TEMPLATES[operator];
  const template = pick("template", "--template", flags.template, templates, templates[0]!);
  if (template === "hierarchical" && mesh.length !== 2) {
    throw new UsageError(
      "bad-mesh",
      `the hierarchical template needs a 2-level mesh (nodes × GPUs per node): use e.g. --mesh 2x${Math.max(2, world / 2)}`,
    );
  }
  const side = pick("side", "--side", flags.side, ["push", "pull"] as const, "push");
  const backend = pick("backend", "--backend", flags.backend, BACKENDS, "copy-engine");
  const shape = resolveShape(operator, flags, world);
  const rows = shape.M;
  if (rows < world)
    throw new UsageError(
      "bad-shape",
      `M=${rows} rows cannot be sharded over ${world} ranks: use --world ${Math.max(2, rows)} or less, or a larger --m`,
    );
  // AG+GEMM gathers uneven shards (the first M mod world ranks one row more); GEMM+RS and
  // GEMM+AR reduce into slabs of whole m-blocks, so their M divides over the ranks.
  if ((operator === "gemm-rs" || operator === "gemm-ar" || operator === "a2a-gemm") && rows % world !== 0) {
    throw new UsageError(
      "bad-shape",
      `M=${rows} does not divide over ${world} ranks; ${operator} ${operator === "a2a-gemm" ? "sends equal slabs of rows" : "reduces into equal slabs of rows"}: use an --m that is a multiple of ${world} (ag-gemm takes uneven shards)`,
    );
  }
  return {
    operator,
    ...shape,
    dtype: flags.dtype ?? DEFAULT_DTYPE,
    mesh,
    world,
    template,
    side,
    split: flags.split ?? 2,
    backend,
    tile: parseTile(flags.tile),
    groupSizeM: flags.groupM ?? 8,
    numSms: flags.sms ?? 132,
    named: { tile: flags.tile !== undefined, groupM: flags.groupM !== undefined },
  };
}

/** One line describing a problem, e.g. `ag-gemm MLP-1 (M=8192 N=1376 K=4096) on 8 ranks, swizzle/push, split 2`. */
export function describeProblem(p: Problem): string {
  const shape = `${p.shapeName !== undefined ? `${p.shapeName} ` : ""}(M=${p.M} N=${p.N} K=${p.K})`;
  const mesh = p.mesh.length > 1 ? `mesh ${p.mesh.join("x")}` : `${p.world} ranks`;
  // Only AllGather templates take a side; ReduceScatter's direction is fixed by the template.
  const sided = (p.operator === "ag-gemm" || p.operator === "all-gather") && (p.template === "swizzle" || p.template === "ring");
  return `${p.operator} ${shape} on ${mesh}, ${p.template}${sided ? `/${p.side}` : ""}, split ${p.split}${dtypeSuffix(p.dtype, ", ")}`;
}
