// AllGather+GEMM on fp8 e4m3 operands with per-tensor scales, the format inference engines
// serve: `C = (AllGather(A) @ B) · scale_a · scale_b`, torch._scaled_mm's semantics. A (the
// gathered operand, 1 byte an element, so every copy moves rows × K bytes) and B are fp8,
// scale_a and scale_b one float32 each (one scale_a for the whole gathered A: every rank holds
// the same value), C is bf16, the products accumulated in fp32. B is held as its transpose
// `gemm_bt` [N, K] (B column-major, as torch._scaled_mm takes it): Hopper's wgmma reads 8-bit
// operands K-major only. The scales are device buffers the kernel reads at every launch, so a
// caller's changed scale is seen by the next launch (a captured graph re-reads it too).
import type { Buffer } from "../../core/manifest/schema.js";
import { builtinBody, type BuiltinBodyName } from "../../core/builtin.js";
import type { Operator, OperatorInput } from "../../core/operator.js";
import { isFp8, outputDtype } from "../../core/dtype.js";
import type { ElementType } from "../../core/device/index.js";
import { EmitError } from "../../core/writer/index.js";
import type { Binding } from "../../core/bind.js";

/** The built-in body of fp8 AllGather+GEMM (the family's bf16 bodies are swapped for it). */
export const FP8_BODY: BuiltinBodyName = "gemm_tma_persistent_fp8";

/**
 * The tile of an fp8 operator that names none (no tuned table holds fp8 entries): 128×128×128.
 * wgmma's fp8 instructions take K in steps of 32, and Triton's fp8 matmul tutorials tile
 * BLOCK_K 128 (the same bytes per stage as bf16's BLOCK_K 64); 128×128 keeps four stages of A
 * and B (32 KiB each) and the bf16 C tile within Hopper's shared memory.
 */
export const FP8_TILE = { BM: 128, BN: 128, BK: 128 } as const;

/** The smallest BLOCK_K of an fp8 tile: one fp8 wgmma's K (32 bytes of each operand row). */
export const FP8_MIN_BLOCK_K = 32;

/** Manifest buffers of the fp8 operator's B (transposed) and scales, and the reference's keys for them. */
export const FP8_B_BUFFER = "gemm_bt";
export const SCALE_A = "scale_a";
export const SCALE_B = "scale_b";

/** The body parameters the scales bind to (ovl's fp8 body names them so; a local body must too). */
export const SCALE_PARAMS = { [`${SCALE_A}_ptr`]: SCALE_A, [`${SCALE_B}_ptr`]: SCALE_B } as const;

/**
 * `op` ready to compile for fp8: a built-in body of the AllGather+GEMM family swapped for
 * {@link FP8_BODY} (a local body is kept: it must take `scale_a_ptr` and `scale_b_ptr`). An
 * operator that is not fp8 comes back as it is, unless it names the fp8 body.
 * @throws {EmitError} `bad-param` for the fp8 body under another element type.
 */
export function fp8Input(op: OperatorInput, family: readonly BuiltinBodyName[]): OperatorInput {
  const dtype = op.options?.dtype ?? "bf16";
  const fp8Body = builtinBody(FP8_BODY);
  if (!isFp8(dtype)) {
    if (op.body.source === fp8Body.source)
      throw new EmitError("bad-param", `${FP8_BODY}.py takes fp8e4m3 operands and scales; compile it with dtype fp8e4m3, not ${dtype}`);
    return op;
  }
  const builtin = family.some((n) => n !== FP8_BODY && builtinBody(n).source === op.body.source);
  return builtin ? { ...op, body: fp8Body } : op;
}

/**
 * Checks an fp8 AllGather+GEMM before it is realised: K a multiple of 16 (A's and Bt's rows
 * are K bytes, and a TMA row must be a multiple of 16 bytes), N a multiple of 8 (C's bf16 rows),
 * BLOCK_K a multiple of {@link FP8_MIN_BLOCK_K}, and the copy engine (or the any-row-count
 * host copies) moving the chunks.
 * @throws {EmitError} `bad-param` naming the first problem, `unsupported-op` for the nvshmem backend.
 */
export function checkFp8(op: Operator): void {
  const { N, K } = op.problem;
  if (K % 16 !== 0)
    throw new EmitError(
      "bad-param",
      `fp8 AllGather+GEMM needs K a multiple of 16 (TMA rows of 1-byte elements are 16-byte aligned); K is ${K}`,
    );
  if (N % 8 !== 0)
    throw new EmitError("bad-param", `fp8 AllGather+GEMM needs N a multiple of 8 (C's bf16 rows, 16-byte aligned); N is ${N}`);
  if (op.tile.BK % FP8_MIN_BLOCK_K !== 0)
    throw new EmitError(
      "bad-param",
      `fp8 tiles need BLOCK_K a multiple of ${FP8_MIN_BLOCK_K} (an fp8 wgmma's K); got ${op.tile.BK} (the default fp8 tile is ${FP8_TILE.BM}x${FP8_TILE.BN}x${FP8_TILE.BK})`,
    );
  if (op.options?.backend === "nvshmem")
    throw new EmitError("unsupported-op", "fp8 AllGather+GEMM moves its chunks with the copy engine; drop the nvshmem backend");
}

/** The fp8 operator's buffers besides the gathered A: Bt [N, K] fp8, C [M, N] bf16, the two fp32 scales (the same on every rank). */
export function fp8Buffers(problem: { readonly M: number; readonly N: number; readonly K: number }, dtype: ElementType) {
  const { M, N, K } = problem;
  const scale = (name: string): Buffer => ({ name, shape: [1], dtype: "fp32", symmetric: false, init: "replicated" });
  return {
    b: { name: FP8_B_BUFFER, shape: [N, K], dtype, symmetric: false, init: "random" } satisfies Buffer,
    c: { name: "gemm_c", shape: [M, N], dtype: outputDtype(dtype), symmetric: false, init: "poison" } satisfies Buffer,
    scales: [scale(SCALE_A), scale(SCALE_B)],
  };
}

/**
 * What the fp8 kernel's `template.params` add, for the engines that model its arithmetic (the
 * numpy engine): B's buffer is [N, K] (`bLayout` `nk`), and the buffers of the two scales.
 */
export const FP8_TEMPLATE_PARAMS = { bLayout: "nk", scaleA: SCALE_A, scaleB: SCALE_B } as const;

/** Bindings of the body's scale parameters to the scale buffers. */
export function scaleBindings(): Record<string, Binding> {
  return Object.fromEntries(
    Object.entries(SCALE_PARAMS).map(([param, buffer]) => [param, { kind: "arg", arg: { kind: "buffer", name: buffer } } as Binding]),
  );
}
