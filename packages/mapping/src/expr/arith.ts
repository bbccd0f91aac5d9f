// Exact integer arithmetic with Python semantics on safe integers: floor division rounds
// toward -inf and the remainder takes the divisor's sign. Shared by evaluation, constant
// folding and interval bounds so that all three agree bit for bit.
import { MappingError, checkedInteger } from "../errors.js";

function divmod(a: number, b: number): [number, number] {
  if (b === 0) throw new MappingError("division-by-zero", `division or modulo of ${a} by zero`);
  // JS `%` is exact (truncated remainder), and a - a % b is a multiple of b no larger than |a|,
  // so the truncated quotient is exact too; floor semantics then shift by one when the signs differ.
  const rt = a % b;
  const qt = (a - rt) / b;
  const q = rt !== 0 && rt < 0 !== b < 0 ? qt - 1 : qt;
  const r = rt !== 0 && rt < 0 !== b < 0 ? rt + b : rt;
  return [q + 0, r + 0];
}

/** `floor(a / b)` exactly (Python `a // b`); throws `division-by-zero`. */
export function floorDivInt(a: number, b: number): number {
  return divmod(a, b)[0];
}

/** `ceil(a / b)` exactly (`-((-a) // b)`); throws `division-by-zero`. */
export function ceilDivInt(a: number, b: number): number {
  return -divmod(-a, b)[0] + 0;
}

/** `a mod b` with the sign of `b` (Python `a % b`); throws `division-by-zero`. */
export function modInt(a: number, b: number): number {
  return divmod(a, b)[1];
}

/** `a + b`, throwing `overflow` when the sum leaves the safe integers. */
export function addInt(a: number, b: number): number {
  return checkedInteger(a + b, `${a} + ${b}`);
}

/** `a * b`, throwing `overflow` when the product leaves the safe integers. */
export function mulInt(a: number, b: number): number {
  return checkedInteger(a * b + 0, `${a} * ${b}`);
}

/** Greatest common divisor of |a| and |b| (gcd(0, 0) = 0). */
export function gcd(a: number, b: number): number {
  a = Math.abs(a);
  b = Math.abs(b);
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}
