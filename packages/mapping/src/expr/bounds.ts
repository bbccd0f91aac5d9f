// Interval bounds of an expression from the declared ranges of its variables. Sound (the
// true value always lies inside), exact for affine expressions in distinct variables; the
// simplifier relies on it to prove div/mod/min/max rewrites.
import { MappingError } from "../errors.js";
import { addInt, ceilDivInt, floorDivInt, modInt, mulInt } from "./arith.js";
import type { Expr, Range } from "./expr.js";
import { atomKey } from "./poly.js";

/**
 * The interval `[min, max]` that `e` stays within for every assignment inside the declared
 * variable ranges (an over-approximation for non-affine expressions). Throws `overflow` when
 * a bound leaves the safe integers and `division-by-zero` when a divisor can only be zero.
 */
export function bounds(e: Expr): Range {
  switch (e.op) {
    case "const":
      return { min: e.value, max: e.value };
    case "var":
      return { min: e.range.min, max: e.range.max };
    case "add":
      return e.args.map(bounds).reduce((a, b) => ({ min: addInt(a.min, b.min), max: addInt(a.max, b.max) }));
    case "mul":
      return mulBounds(e.args);
    case "min": {
      const bs = e.args.map(bounds);
      return { min: Math.min(...bs.map((b) => b.min)), max: Math.min(...bs.map((b) => b.max)) };
    }
    case "max": {
      const bs = e.args.map(bounds);
      return { min: Math.max(...bs.map((b) => b.min)), max: Math.max(...bs.map((b) => b.max)) };
    }
    case "floorDiv":
      return divBounds(bounds(e.dividend), bounds(e.divisor), floorDivInt);
    case "ceilDiv":
      return divBounds(bounds(e.dividend), bounds(e.divisor), ceilDivInt);
    case "mod":
      return modBounds(bounds(e.dividend), bounds(e.divisor));
    default:
      throw new MappingError("invalid-expression", `unknown expression node ${JSON.stringify(e)}`);
  }
}

function mulRange(a: Range, b: Range): Range {
  const c = [mulInt(a.min, b.min), mulInt(a.min, b.max), mulInt(a.max, b.min), mulInt(a.max, b.max)];
  return { min: Math.min(...c), max: Math.max(...c) };
}

function powRange(r: Range, p: number): Range {
  let out: Range = { min: 1, max: 1 };
  for (let i = 0; i < p; i++) out = mulRange(out, r);
  // An even power of an interval that straddles zero is non-negative; the product of
  // independent intervals would lose that.
  if (p % 2 === 0 && r.min < 0 && r.max > 0) out = { min: 0, max: out.max };
  return out;
}

function mulBounds(args: readonly Expr[]): Range {
  // Repeated factors (x * x) are grouped so even powers keep their sign.
  const groups = new Map<string, { e: Expr; p: number }>();
  for (const a of args) {
    const k = atomKey(a);
    const g = groups.get(k);
    if (g) g.p += 1;
    else groups.set(k, { e: a, p: 1 });
  }
  let out: Range = { min: 1, max: 1 };
  for (const { e, p } of groups.values()) out = mulRange(out, powRange(bounds(e), p));
  return out;
}

function divBounds(a: Range, b: Range, op: (x: number, y: number) => number): Range {
  if (b.min === 0 && b.max === 0) throw new MappingError("division-by-zero", "divisor is always zero");
  // a / b is monotone in each operand while b keeps one sign, so the extremes sit at corners
  // of the box; the zero divisor itself is excluded (it is an error, not a value).
  const parts: Range[] = [];
  if (b.min < 0) parts.push({ min: b.min, max: Math.min(b.max, -1) });
  if (b.max > 0) parts.push({ min: Math.max(b.min, 1), max: b.max });
  const vals: number[] = [];
  for (const p of parts) for (const x of [a.min, a.max]) for (const y of [p.min, p.max]) vals.push(op(x, y));
  return { min: Math.min(...vals), max: Math.max(...vals) };
}

function modBounds(a: Range, b: Range): Range {
  if (b.min === 0 && b.max === 0) throw new MappingError("division-by-zero", "modulo by a divisor that is always zero");
  if (b.min === b.max) {
    const c = b.min;
    // Inside one period the remainder is the dividend shifted by a constant.
    if (floorDivInt(a.min, c) === floorDivInt(a.max, c)) {
      const lo = modInt(a.min, c);
      const hi = modInt(a.max, c);
      return { min: Math.min(lo, hi), max: Math.max(lo, hi) };
    }
  }
  let lo = Number.POSITIVE_INFINITY;
  let hi = Number.NEGATIVE_INFINITY;
  if (b.max > 0) {
    const top = b.max - 1;
    const small = a.min >= 0 && a.max < Math.max(b.min, 1);
    lo = Math.min(lo, small ? a.min : 0);
    hi = Math.max(hi, a.min >= 0 ? Math.min(a.max, top) : top);
  }
  if (b.min < 0) {
    const bottom = b.min + 1;
    const small = a.max <= 0 && a.min > Math.min(b.max, -1);
    hi = Math.max(hi, small ? a.max : 0);
    lo = Math.min(lo, a.max <= 0 ? Math.max(a.min, bottom) : bottom);
  }
  return { min: lo, max: hi };
}
