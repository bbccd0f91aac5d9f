// What every kernel template shares: the module frame (docstring, imports, among them the
// device primitives of `ovl_runtime.language`), the checks of GEMM tiling parameters, and the description of a
// template (entry point, argument names in order, constexpr names) the manifest follows.
import { DEVICE_FUNCTIONS, type ElementType, TL_DTYPE } from "../../../core/device/index.js";
import { EmitError, PythonWriter } from "../../../core/writer/index.js";

/** Options every template's source depends on. */
export interface SourceOptions {
  /** Element type of the tensors the kernel reads and writes (default `bf16`). */
  readonly dtype?: ElementType;
}

/**
 * A kernel template as the manifest sees it: its `kind` (the manifest's
 * `template.kind`), its `@triton.jit` entry, its runtime argument names in launch order,
 * and its constexpr parameter names.
 */
export interface KernelTemplateInfo {
  /** The manifest's `template.kind`. */
  readonly kind: string;
  /** Name of the `@triton.jit` function. */
  readonly entry: string;
  /** Runtime argument names, in launch order. */
  readonly args: readonly string[];
  /** `tl.constexpr` parameter names, after the arguments. */
  readonly constexprs: readonly string[];
}

/** Tiling of a GEMM `C[M,N] = A[M,K] @ B[K,N]` kernel. */
export interface GemmParams {
  readonly M: number;
  readonly N: number;
  readonly K: number;
  readonly BLOCK_M: number;
  readonly BLOCK_N: number;
  readonly BLOCK_K: number;
  readonly GROUP_M: number;
}

/** Launch options of a kernel. */
export interface LaunchOptions {
  /** Warps per program (a power of two, 1..16). */
  readonly numWarps: number;
  /** Software-pipelining stages of the K loop (1..8). */
  readonly numStages: number;
}

/** A positive safe integer, or an EmitError naming `what`. */
export function checkPositive(value: unknown, what: string): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 1) {
    throw new EmitError("bad-param", `${what} must be a positive integer, got ${String(value)}`);
  }
  return value;
}

/** A power of two in `[lo, hi]`, as `tl.arange` and TMA block shapes need. */
export function checkBlock(value: unknown, what: string, lo = 16, hi = 256): number {
  const v = checkPositive(value, what);
  if ((v & (v - 1)) !== 0 || v < lo || v > hi) {
    throw new EmitError("bad-param", `${what} must be a power of two in [${lo}, ${hi}], got ${v}`);
  }
  return v;
}

/**
 * Checks a GEMM tiling: positive problem sizes, power-of-two blocks (16..256), a
 * positive `GROUP_M`, and rows of A and B 16-byte aligned (`K` and `N` multiples of 8
 * elements) as TMA descriptors require.
 */
export function checkGemmParams(p: GemmParams): GemmParams {
  for (const k of ["M", "N", "K", "GROUP_M"] as const) checkPositive(p[k], k);
  for (const k of ["BLOCK_M", "BLOCK_N", "BLOCK_K"] as const) checkBlock(p[k], k);
  if (p.K % 8 !== 0 || p.N % 8 !== 0) {
    throw new EmitError("bad-param", `TMA needs 16-byte rows: K (${p.K}) and N (${p.N}) must be multiples of 8`);
  }
  return p;
}

/** Checks `numWarps` (a power of two, 1..16) and `numStages` (1..8). */
export function checkLaunch(o: LaunchOptions): LaunchOptions {
  checkBlock(o.numWarps, "numWarps", 1, 16);
  const s = checkPositive(o.numStages, "numStages");
  if (s > 8) throw new EmitError("bad-param", `numStages must be at most 8, got ${s}`);
  return o;
}

/** The `tl` element type of `dtype`, checked. */
export function tlType(dtype: ElementType | undefined): string {
  const d = dtype ?? "bf16";
  const t = (TL_DTYPE as Record<string, string | undefined>)[d];
  if (t === undefined) throw new EmitError("bad-param", `dtype "${String(d)}" is not one of ${Object.keys(TL_DTYPE).join(", ")}`);
  return t;
}

/** The Python module that defines the device primitives emitted kernels import. */
export const DEVICE_MODULE = "ovl_runtime.language";

/** The device primitives `source` calls (`name(`), in the library's order. */
export function devicePrimitivesUsed(source: string): string[] {
  return DEVICE_FUNCTIONS.filter((f) => new RegExp(`(^|[^A-Za-z0-9_.])${f}\\(`).test(source));
}

/** What a kind of kernel module adds to {@link kernelModule}'s (TLX modules: `tlx/parts.ts`). */
export interface ModuleExtras {
  /** What emitted it, said in the docstring (e.g. `TLX, warp-specialised`). */
  readonly how?: string;
  /** Import lines after `triton` and `triton.language`. */
  readonly imports?: readonly string[];
  /** Device functions the module defines itself, written before the kernel, given the kernel's text. */
  readonly prelude?: (w: PythonWriter, kernel: string) => void;
}

/**
 * A kernel module: a docstring, the imports (the device primitives the kernel calls come
 * from `ovl_runtime.language`, shipped with the runner), what `extras` adds, then `kernel`
 * written by the template. `dtype` is checked; the primitives take element types from their arguments.
 */
export function kernelModule(
  summary: string,
  dtype: ElementType | undefined,
  kernel: (w: PythonWriter) => void,
  extras: ModuleExtras = {},
): string {
  tlType(dtype);
  const body = new PythonWriter();
  body.line("@triton.jit");
  kernel(body);
  const text = body.toString();
  const used = devicePrimitivesUsed(text);
  const w = new PythonWriter();
  const by = extras.how === undefined ? "@ovl/tlx-emitter" : `@ovl/tlx-emitter (${extras.how})`;
  w.docstring(summary, "", `Emitted by ${by}. The device primitives come from ${DEVICE_MODULE} (the ovl runner).`);
  w.line("import triton");
  w.line("import triton.language as tl");
  for (const line of extras.imports ?? []) w.line(line);
  if (used.length > 0) w.line(`from ${DEVICE_MODULE} import ${used.join(", ")}`);
  w.line().line();
  extras.prelude?.(w, text);
  return w.toString() + text;
}

/** `def entry(a, b, ..., X: tl.constexpr, ...)` for a template. */
export function signature(info: KernelTemplateInfo): string {
  const params = [...info.args, ...info.constexprs.map((c) => `${c}: tl.constexpr`)];
  return `def ${info.entry}(${params.join(", ")})`;
}

/**
 * The persistent grouped traversal shared by the GEMM templates: program `pid` strides
 * over tile ids by the number of programs; within a group of `GROUP_M` visit rows, tiles
 * go down the rows first (L2 reuse of B); the m-block is `order[visit_m]`.
 */
export function writeGroupedTileLoop(w: PythonWriter, body: (w: PythonWriter) => void): void {
  w.line("num_pid_in_group = GROUP_M * num_pid_n");
  w.block("for tile_id in tl.range(tl.program_id(0), num_tiles, tl.num_programs(0), flatten=False)", (l) => {
    l.line("group_id = tile_id // num_pid_in_group");
    l.line("first_m = group_id * GROUP_M");
    l.line("group_size_m = min(num_pid_m - first_m, GROUP_M)");
    l.line("visit_m = first_m + (tile_id % group_size_m)");
    l.line("pid_n = (tile_id % num_pid_in_group) // group_size_m");
    l.line("pid_m = tl.load(order_ptr + visit_m)");
    body(l);
  });
}

/** TMA descriptors of A and B, and the grid facts, at the top of a GEMM kernel. */
export function writeGemmPrologue(w: PythonWriter, tmaStore: boolean): void {
  w.line("num_pid_m = tl.cdiv(M, BLOCK_M)");
  w.line("num_pid_n = tl.cdiv(N, BLOCK_N)");
  w.line("num_tiles = num_pid_m * num_pid_n");
  w.line("k_tiles = tl.cdiv(K, BLOCK_K)");
  w.line("a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])");
  w.line("b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])");
  if (tmaStore) w.line("c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])");
}

/** The K loop of one tile: `acc += A[rows, k] @ B[k, cols]` via TMA loads and `tl.dot`. */
export function writeKLoop(w: PythonWriter, rowsExpr: string): void {
  w.line("acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)");
  w.block("for ki in range(k_tiles)", (k) => {
    k.line("offs_k = ki * BLOCK_K");
    k.line(`a = a_desc.load([${rowsExpr}, offs_k])`);
    k.line("b = b_desc.load([offs_k, offs_bn])");
    k.line("acc = tl.dot(a, b, acc)");
  });
}
