// The element types operators are offered in (`ovl emit --dtype`, the torch API's kernel
// library) and each one's default check tolerance. Kernels take their element type from the
// manifest's buffers (`TL_DTYPE` where a template names it), so a dtype here is a choice of
// buffers, reference and tolerance, never text spliced into a kernel.
import type { ElementType } from "./device/index.js";

/**
 * Element types the operators are offered in: bf16 (the default) and fp16, both 2-byte
 * operands of the tensor cores (wgmma and tcgen05 `kind::f16`) at the same rate, so the
 * tiles, stages and tuned configurations of bf16 serve fp16 as they are. fp32 compiles too
 * (`EmitOptions.dtype`, used by the emulation tests) but is not offered: its dots run as TF32.
 */
export const OPERATOR_DTYPES = ["bf16", "fp16"] as const satisfies readonly ElementType[];
/** An element type operators are offered in. */
export type OperatorDtype = (typeof OPERATOR_DTYPES)[number];

/** Whether `value` names an element type operators are offered in. */
export function isOperatorDtype(value: unknown): value is OperatorDtype {
  return (OPERATOR_DTYPES as readonly unknown[]).includes(value);
}

/**
 * The relative Frobenius error a checked run allows by default, per element type. bf16 keeps
 * its 2e-2. fp16 rounds to 11 significant bits where bf16 rounds to 8, so its rounding errors
 * are about 8× smaller. Measured in the interpreter engine (which rounds as the GPU does) at
 * small shapes: 2e-4 for an output rounded once (AG+GEMM, attention, MoE, SiLU-mul), 3e-4 for
 * GEMM+ReduceScatter and GEMM+AllReduce on 4 ranks (each partial and partial sum rounded), where
 * bf16 measured 5.9e-3 against its 2e-2. 5e-3 keeps fp16 a margin of over ten while catching a
 * wrong or missing chunk 4× sooner than bf16's bound. fp32 keeps 2e-2: its dots run as TF32
 * (10-bit mantissa), whose bound is another change.
 */
export const DEFAULT_TOLERANCE: Readonly<Record<ElementType, number>> = { bf16: 2e-2, fp16: 5e-3, fp32: 2e-2 };
