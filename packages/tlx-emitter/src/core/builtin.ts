// ovl's built-in compute bodies: ordinary annotated Triton kernels shipped as `.py` files in
// the package's `kernels/` folder, read and compiled exactly as a user's kernel is.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { assetRoot } from "./assets.js";
import { EmitError } from "./writer/index.js";
import type { KernelBody } from "./operator.js";

/**
 * The built-in bodies, by name (the file is `kernels/<name>.py`). The `_flat`, `_streamk`
 * and `_tma` variants compute the same GEMM with another loop structure, tail schedule or
 * epilogue (`_fp8`: fp8 e4m3 operands, B transposed, per-tensor scales); the tuned
 * configurations (`configs.ts`) choose among a family per shape.
 */
export const BUILTIN_BODIES = [
  "gemm_tma_persistent",
  "gemm_tma_persistent_flat",
  "gemm_tma_persistent_streamk",
  "gemm_tma_persistent_fp8",
  "gemm_producer",
  "gemm_producer_tma",
  "gemm_producer_tma_flat",
  "grouped_gemm",
  "moe_gather_gemm",
  "moe_gather_gemm_blocks",
  "moe_gemm_scatter",
  "moe_gemm_scatter_ws",
  "flash_attention",
  "gemm_silu_mul",
] as const;
export type BuiltinBodyName = (typeof BUILTIN_BODIES)[number];

/** Path of a built-in body's file. */
export function builtinBodyPath(name: BuiltinBodyName): string {
  return join(assetRoot(), "kernels", `${name}.py`);
}

/**
 * A built-in body, read from the package. @throws {EmitError} `bad-param` for an unknown name.
 */
export function builtinBody(name: BuiltinBodyName): KernelBody {
  if (!(BUILTIN_BODIES as readonly string[]).includes(name)) {
    throw new EmitError("bad-param", `no built-in body "${String(name)}" (there are ${BUILTIN_BODIES.join(", ")})`);
  }
  return { path: `${name}.py`, source: readFileSync(builtinBodyPath(name), "utf8") };
}
