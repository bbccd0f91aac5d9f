// The tensor-parallel MLP as one operator chain: AllGather + gate/up GEMM + SiLU-mul
// (`ag-gemm-silu`) writes Y [M, I] on every rank, and that same buffer is the A of
// GEMM + ReduceScatter with W_down [I, hidden] (`gemm-rs`). Two launches per rank, no copy.
import { allGatherSwizzle, planSignals, reduceScatterDirect, type ChunkPlan } from "@ovl/chunk-plan";
import { Chain, CHAIN_SCHEMA } from "../../core/chain/schema.js";
import type { EmitResult } from "../../core/result.js";
import { resolveOptions, type EmitOptions } from "../../core/options.js";
import { EmitError } from "../../core/writer/index.js";
import { gemmSiluMulBody, withSiluMulDefaults } from "../ag-gemm-silu/triton.js";
import { compile } from "../../compile/compile.js";
import { tritonBackend } from "../../compile/backends.js";
import type { TargetName } from "@ovl/primitives";
import { builtinBody } from "../../core/builtin.js";
import type { KernelBody, OperatorInput } from "../../core/operator.js";
import { refuseFp8Template } from "../../core/dtype.js";

/** The MLP's shape, its plans and compute choices. */
export interface MlpInput {
  /** Chain name (an identifier); the stages are `<name>_up` and `<name>_down`. */
  readonly name: string;
  readonly world: number;
  /** Tokens of all ranks (X is `[M, hidden]`, row-sharded; M a multiple of the world). */
  readonly M: number;
  readonly hidden: number;
  /** Each rank's intermediate columns I (its W_gate|up is `[hidden, 2·I]`, its W_down `[I, hidden]`). */
  readonly intermediate: number;
  /** Chunks per rank of both default plans (default 1). */
  readonly split?: number;
  /** The AllGather of X (default the swizzled push AllGather) and the ReduceScatter of the output (default direct). */
  readonly agPlan?: ChunkPlan;
  readonly rsPlan?: ChunkPlan;
  /** Bodies of the two stages (default the built-in `gemm_silu_mul` and `gemm_producer`). */
  readonly upBody?: KernelBody;
  readonly downBody?: KernelBody;
  /** Tiles of the two stages (default: `GEMM_SILU_MUL_DEFAULT` for the up stage, the tuned table's for the down stage). */
  readonly upTile?: { readonly BM: number; readonly BN: number; readonly BK: number };
  readonly downTile?: { readonly BM: number; readonly BN: number; readonly BK: number };
  readonly options?: EmitOptions;
  /** Target whose tuned table decides the down stage's configuration when it names no tile (default: the default target). */
  readonly target?: TargetName;
}

/** A compiled chain: each stage's folder (relative to the chain file) and its kernels and manifest. */
export interface ChainResult {
  readonly chain: Chain;
  readonly stages: readonly { readonly dir: string; readonly result: EmitResult }[];
}

/** The stage folders of an MLP chain, relative to its chain file. */
export const MLP_STAGE_DIRS = ["up", "down"] as const;

/**
 * Compile the MLP chain: both operators through `compile()` and the `ovl.chain/v1` that links
 * the first's output to the second's A.
 * @throws {EmitError} for shapes the two operators do not share, or anything either stage's compile refuses.
 */
export async function compileMlp(input: MlpInput): Promise<ChainResult> {
  const { name, world, M, hidden, intermediate: I } = input;
  for (const [k, v] of Object.entries({ world, M, hidden, intermediate: I })) {
    if (!Number.isInteger(v) || v <= 0) throw new EmitError("bad-param", `mlp ${k} must be a positive integer, got ${v}`);
  }
  if (M % world !== 0)
    throw new EmitError("bad-param", `mlp M (${M}) must be a multiple of the world (${world}): GEMM+ReduceScatter reduces equal slabs`);
  const o = resolveOptions(input.options ?? {});
  refuseFp8Template(o.dtype, "the MLP chain");
  const split = input.split ?? 1;
  const dtype = o.dtype;
  const agPlan =
    input.agPlan ??
    planSignals(allGatherSwizzle({ tensor: { name: "X", shape: [M, hidden], dtype }, axis: 0, mesh: [world], split, side: "push" }));
  const rsPlan =
    input.rsPlan ??
    planSignals(
      reduceScatterDirect({
        tensor: { name: "Out", shape: [M, hidden], dtype },
        src: "Out_partial",
        axis: 0,
        mesh: [world],
        split,
        afterCompute: true,
      }),
    );
  const up: OperatorInput = {
    name: `${name}_up`,
    kind: "ag-gemm-silu",
    plan: agPlan,
    body: input.upBody ?? gemmSiluMulBody(),
    problem: { M, N: I, K: hidden },
    ...(input.upTile ? { tile: input.upTile } : {}),
    options: input.options ?? {},
  };
  const down: OperatorInput = {
    name: `${name}_down`,
    kind: "gemm-rs",
    plan: rsPlan,
    body: input.downBody ?? builtinBody("gemm_producer"),
    problem: { M, N: hidden, K: I },
    ...(input.downTile ? { tile: input.downTile } : {}),
    options: input.options ?? {},
  };
  const tuning = input.target === undefined ? {} : { target: input.target };
  const upResult = await compile(withSiluMulDefaults(up), tritonBackend, tuning);
  const downResult = await compile(down, tritonBackend, tuning);
  const upRef = upResult.manifest.reference;
  const downRef = downResult.manifest.reference;
  const y = upResult.manifest.buffers.find((b) => b.name === upRef.output);
  const downA = downRef.inputs.A;
  const a = downResult.manifest.buffers.find((b) => b.name === downA);
  if (y === undefined || a === undefined || downA === undefined)
    throw new EmitError("bad-param", "mlp: a stage's manifest lacks its reference buffers");
  if (y.shape.join("x") !== a.shape.join("x") || y.dtype !== a.dtype || a.symmetric) {
    throw new EmitError(
      "bad-param",
      `mlp: the up stage's output ${y.name} [${y.shape.join(", ")}] ${y.dtype} cannot be the down stage's ${a.name} [${a.shape.join(", ")}] ${a.dtype}${a.symmetric ? " (symmetric)" : ""}`,
    );
  }
  const [upDir, downDir] = MLP_STAGE_DIRS;
  const chain = Chain.parse({
    $schema: CHAIN_SCHEMA,
    name,
    world,
    dtype,
    stages: [
      { name: up.name, manifest: `${upDir}/manifest.json` },
      { name: down.name, manifest: `${downDir}/manifest.json` },
    ],
    links: [{ from: { stage: 0, buffer: y.name }, to: { stage: 1, buffer: a.name } }],
    reference: {
      operator: "mlp",
      M,
      hidden,
      intermediate: I,
      inputs: {
        X: { stage: 0, buffer: upRef.inputs.A! },
        W_gate_up: { stage: 0, buffer: upRef.inputs.B! },
        W_down: { stage: 1, buffer: downRef.inputs.B! },
      },
      output: { stage: 1, buffer: downRef.output },
      tolerance: Math.max(upRef.tolerance, downRef.tolerance),
    },
  });
  return {
    chain,
    stages: [
      { dir: upDir, result: upResult },
      { dir: downDir, result: downResult },
    ],
  };
}
