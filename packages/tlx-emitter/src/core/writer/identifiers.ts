// Python identifiers the emitter may write: the identifier grammar, minus Python's
// keywords and soft keywords, minus the names emitted kernels rely on (builtins used in
// kernel bodies, the `tl`/`triton` modules), so no name from a plan can shadow them.
import { PYTHON_KEYWORDS } from "@ovl/mapping";
import { EmitError } from "./errors.js";

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Python 3 keywords and soft keywords (one list, `@ovl/mapping`'s). */
export { PYTHON_KEYWORDS };

/**
 * Names emitted kernels use that a generated name must not shadow: the modules, the
 * Python builtins called inside `@triton.jit` bodies, and Triton's language namespace
 * names a kernel may import unqualified.
 */
export const RESERVED_NAMES: ReadonlySet<string> = new Set([
  "tl",
  "triton",
  "tlx",
  "range",
  "min",
  "max",
  "len",
  "int",
  "float",
  "bool",
  "print",
  "abs",
  "constexpr",
  "static_range",
  "program_id",
  "num_programs",
  "cdiv",
  "load",
  "store",
  "dot",
  "zeros",
  "arange",
  "atomic_add",
  "atomic_xchg",
  "atomic_cas",
  "debug_barrier",
  "where",
  "inline_asm_elementwise",
  "make_tensor_descriptor",
  "pointer_type",
  "jit",
  "__name__",
  "__file__",
]);

/** Whether `name` is safe to emit as a Python identifier (see {@link checkIdentifier}). */
export function isSafeIdentifier(name: string): boolean {
  return IDENTIFIER.test(name) && !PYTHON_KEYWORDS.has(name) && !RESERVED_NAMES.has(name) && !name.startsWith("__");
}

/**
 * Returns `name` when it is a safe Python identifier: it matches
 * `^[A-Za-z_][A-Za-z0-9_]*$`, is not a keyword, does not shadow a name emitted kernels
 * use, and is not a dunder name.
 * @throws {EmitError} `bad-identifier` or `reserved-identifier`.
 */
export function checkIdentifier(name: string, what = "identifier"): string {
  if (typeof name !== "string" || !IDENTIFIER.test(name)) {
    throw new EmitError(
      "bad-identifier",
      `${what} ${JSON.stringify(name)} is not a Python identifier: use letters, digits and _, not starting with a digit`,
    );
  }
  if (PYTHON_KEYWORDS.has(name) || RESERVED_NAMES.has(name) || name.startsWith("__")) {
    throw new EmitError("reserved-identifier", `${what} "${name}" is a Python keyword or a name emitted kernels rely on; rename it`);
  }
  return name;
}
