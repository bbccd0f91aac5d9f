// The element types operators are offered in (`ovl emit --dtype`, the torch API's kernel
// library) and each one's default check tolerance. Kernels take their element type from the
// manifest's buffers (`TL_DTYPE` where a template names it), so a dtype here is a choice of
// buffers, reference and tolerance, never text spliced into a kernel.
import type { ElementType } from "./device/index.js";
import { EmitError } from "./writer/index.js";

/**
 * Element types the operators are offered in: bf16 (the default) and fp16, both 2-byte
 * operands of the tensor cores (wgmma and tcgen05 `kind::f16`) at the same rate, so the
 * tiles, stages and tuned configurations of bf16 serve fp16 as they are; and fp8e4m3
 * (AllGather+GEMM only, `FP8_OPERATORS`: see `operators/ag-gemm/fp8.ts`). fp32 compiles too
 * (`EmitOptions.dtype`, used by the emulation tests) but is not offered: its dots run as TF32.
 */
export const OPERATOR_DTYPES = ["bf16", "fp16", "fp8e4m3"] as const satisfies readonly ElementType[];
/** An element type operators are offered in. */
export type OperatorDtype = (typeof OPERATOR_DTYPES)[number];

/** Whether `value` names an element type operators are offered in. */
export function isOperatorDtype(value: unknown): value is OperatorDtype {
  return (OPERATOR_DTYPES as readonly unknown[]).includes(value);
}

/**
 * The operators compiled for fp8e4m3 operands: `C = (AllGather(A) @ B) · scale_a · scale_b`,
 * A and B in fp8 e4m3, the two scales per-tensor fp32, C in bf16 (torch._scaled_mm's
 * semantics). The others refuse it, naming these.
 */
export const FP8_OPERATORS = ["ag-gemm"] as const;

/** Whether `dtype` is an fp8 element type (1-byte operands, scaled, with a bf16 output). */
export function isFp8(dtype: ElementType): dtype is "fp8e4m3" {
  return dtype === "fp8e4m3";
}

/** The element type an operator of `dtype` operands writes its output in: bf16 for fp8 operands, else `dtype`. */
export function outputDtype(dtype: ElementType): Exclude<ElementType, "fp8e4m3"> {
  return isFp8(dtype) ? "bf16" : dtype;
}

/**
 * Why `kind` cannot be compiled for `dtype`, or undefined: fp8e4m3 is AllGather+GEMM's alone
 * (`FP8_OPERATORS`).
 */
export function dtypeRefusal(kind: string, dtype: ElementType): string | undefined {
  if (!isFp8(dtype) || (FP8_OPERATORS as readonly string[]).includes(kind)) return undefined;
  return `${kind} is not built for ${dtype}: fp8 operands (per-tensor scales, bf16 output) are taken by ${FP8_OPERATORS.join(", ")} only; compile ${kind} with bf16 or fp16`;
}

/**
 * The relative Frobenius error a checked run allows by default, per element type. bf16 keeps
 * its 2e-2. fp16 rounds to 11 significant bits where bf16 rounds to 8, so its rounding errors
 * are about 8× smaller. Measured in the interpreter engine (which rounds as the GPU does) at
 * small shapes: 2e-4 for an output rounded once (AG+GEMM, attention, MoE, SiLU-mul), 3e-4 for
 * GEMM+ReduceScatter and GEMM+AllReduce on 4 ranks (each partial and partial sum rounded), where
 * bf16 measured 5.9e-3 against its 2e-2. 5e-3 keeps fp16 a margin of over ten while catching a
 * wrong or missing chunk 4× sooner than bf16's bound. fp32 keeps 2e-2: its dots run as TF32
 * (10-bit mantissa), whose bound is another change. fp8e4m3: the reference is computed from the
 * same fp8 operands (exact in fp32) and the same scales, so what remains is the fp32
 * accumulation's order and the one bf16 rounding of the output (2⁻⁹ relative): 1e-2.
 */
export const DEFAULT_TOLERANCE: Readonly<Record<ElementType, number>> = { bf16: 2e-2, fp16: 5e-3, fp32: 2e-2, fp8e4m3: 1e-2 };

/** Element types the TLX backend's GEMMs take: the 2-byte ones (its wgmma and tcgen05 `kind::f16` operands). */
export const TLX_DTYPES = ["bf16", "fp16"] as const satisfies readonly OperatorDtype[];

/** Whether the TLX backend takes `value`. */
export function isTlxDtype(value: unknown): value is (typeof TLX_DTYPES)[number] {
  return (TLX_DTYPES as readonly unknown[]).includes(value);
}

/**
 * Refuse fp8 in a kernel template that is not the fp8 AllGather+GEMM (`what` names it, as the
 * message says). @throws {EmitError} `unsupported-op`.
 */
export function refuseFp8Template(dtype: ElementType, what: string): void {
  if (isFp8(dtype))
    throw new EmitError(
      "unsupported-op",
      `${what} takes bf16, fp16 or fp32 operands, not ${dtype}: fp8 operands are taken by ${FP8_OPERATORS.join(", ")} through compile() (its fp8 body)`,
    );
}
