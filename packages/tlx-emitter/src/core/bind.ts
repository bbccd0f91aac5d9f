// Binding a local kernel's own parameters to what the manifest provides: buffers, problem
// sizes, strides, tile sizes and the persistent grid. Names follow the spellings of Triton's
// tutorials and ovl's built-in bodies; anything else is bound explicitly by the caller.
import type { KernelArg } from "./manifest/schema.js";
import { EmitError } from "./writer/index.js";

/** What one kernel parameter receives: a manifest argument, or a constexpr value. */
export type Binding = { readonly kind: "arg"; readonly arg: KernelArg } | { readonly kind: "constexpr"; readonly value: number | boolean };

/** A GEMM `C[M,N] = A[M,K] @ B[K,N]` as a body sees it: buffers and tiling. */
export interface GemmBindingInput {
  /** Manifest buffer names of A, B and C. */
  readonly buffers: { readonly a: string; readonly b: string; readonly c: string };
  /** Kernel parameter names of A (the communicated operand for a consumer) etc., when known. */
  readonly params?: { readonly a?: string; readonly b?: string; readonly c?: string };
  readonly M: number;
  readonly N: number;
  readonly K: number;
  readonly BLOCK_M: number;
  readonly BLOCK_N: number;
  readonly BLOCK_K: number;
  readonly GROUP_M: number;
}

const arg = (a: KernelArg): Binding => ({ kind: "arg", arg: a });
const int = (value: number): Binding => arg({ kind: "int", value });
const constexpr = (value: number): Binding => ({ kind: "constexpr", value });

/** Row-major strides of each operand, by the tutorials' `stride_<operand><dim>` names. */
function strides(g: GemmBindingInput): Record<string, number> {
  return {
    stride_am: g.K,
    stride_ak: 1,
    stride_bk: g.N,
    stride_bn: 1,
    stride_cm: g.N,
    stride_cn: 1,
  };
}

/**
 * Binds every parameter of a GEMM body: `explicit` first, then by name — the operand
 * pointers (`a_ptr`/`a`…, or the names in `g.params`), `M`/`N`/`K`, row-major
 * `stride_am`…`stride_cn`, tile sizes (`BLOCK_M` or `BLOCK_SIZE_M`…, `GROUP_M` or
 * `GROUP_SIZE_M`) and `NUM_SMS` / `NUM_PROGRAMS` (the persistent grid's size).
 * @throws {EmitError} `bad-param` naming every parameter left without a binding.
 */
export function bindGemm(
  params: readonly string[],
  g: GemmBindingInput,
  explicit: Readonly<Record<string, Binding>> = {},
): Map<string, Binding> {
  const byName: Record<string, Binding> = {
    M: int(g.M),
    N: int(g.N),
    K: int(g.K),
    BLOCK_M: constexpr(g.BLOCK_M),
    BLOCK_SIZE_M: constexpr(g.BLOCK_M),
    BLOCK_N: constexpr(g.BLOCK_N),
    BLOCK_SIZE_N: constexpr(g.BLOCK_N),
    BLOCK_K: constexpr(g.BLOCK_K),
    BLOCK_SIZE_K: constexpr(g.BLOCK_K),
    GROUP_M: constexpr(g.GROUP_M),
    GROUP_SIZE_M: constexpr(g.GROUP_M),
    NUM_SMS: arg({ kind: "num-programs" }),
    NUM_PROGRAMS: arg({ kind: "num-programs" }),
  };
  for (const [name, v] of Object.entries(strides(g))) byName[name] = int(v);
  for (const [op, buffer] of Object.entries(g.buffers) as [keyof GemmBindingInput["buffers"], string][]) {
    const named = g.params?.[op];
    for (const p of named === undefined ? [`${op}_ptr`, op, op.toUpperCase()] : [named]) byName[p] = arg({ kind: "buffer", name: buffer });
  }
  const out = new Map<string, Binding>();
  const missing: string[] = [];
  for (const p of params) {
    const b = explicit[p] ?? byName[p];
    if (b === undefined) missing.push(p);
    else out.set(p, b);
  }
  for (const p of Object.keys(explicit)) {
    if (!params.includes(p))
      throw new EmitError("bad-param", `bind names "${p}", which is not a parameter of the kernel (it has ${params.join(", ")})`);
  }
  if (missing.length > 0) {
    throw new EmitError(
      "bad-param",
      `the kernel's parameter${missing.length > 1 ? "s" : ""} ${missing.join(", ")} ha${missing.length > 1 ? "ve" : "s"} no binding: ` +
        `name them as ovl's GEMM bodies do (a_ptr, M, stride_am, BLOCK_SIZE_M, NUM_SMS...) or pass bind: { ${missing[0]}: ... }`,
    );
  }
  return out;
}
