// The simplifier: rewrites an expression to a canonical, value-preserving form. Sums and
// products become a polynomial of atoms; floorDiv/ceilDiv/mod/min/max use the declared
// variable ranges (through `bounds`) to fold away what the ranges decide.
import { MappingError } from "../errors.js";
import { ceilDivInt, floorDivInt, gcd, modInt, mulInt } from "./arith.js";
import { bounds } from "./bounds.js";
import { variableRanges, type DivExpr, type Expr } from "./expr.js";
import {
  addPoly,
  atomKey,
  atomPoly,
  compareExprs,
  constPoly,
  isConstant,
  mulPoly,
  polyToExpr,
  scalePoly,
  soleAtom,
  withKeyCache,
  type Poly,
  type Term,
} from "./poly.js";

/**
 * Canonical form of `e`, equal in value to `e` for every assignment inside the declared
 * variable ranges (where `e` itself evaluates without error). Constants fold; sums and
 * products become `Σ coeff × monomial` with like terms combined and terms sorted; a variable
 * whose range is one point becomes that constant. With a constant divisor `c > 0`:
 * `floorDiv(a*c + b, c) → a + floorDiv(b, c)`, `mod(a*c + b, c) → mod(b, c)`, a common factor
 * of dividend and divisor cancels, `floorDiv(floorDiv(x, a), b) → floorDiv(x, a*b)`, and when
 * the ranges keep the dividend in one period `[k*c, k*c + c)` the quotient folds to `k` and
 * the remainder to `b - k*c` (so `floorDiv(x, c) → 0`, `mod(x, c) → x` for `0 <= x < c`).
 * `min`/`max` flatten, fold constants and drop operands the ranges prove never win.
 * Idempotent: `simplify(simplify(e))` deep-equals `simplify(e)`.
 */
export function simplify(e: Expr): Expr {
  variableRanges(e);
  normCache = new WeakMap();
  try {
    return withKeyCache(() => polyToExpr(norm(e)));
  } finally {
    normCache = undefined;
  }
}

// Polys are never mutated once built, so within one simplify call the normal form of a node
// (atoms' dividends are revisited by the nested-division and recombination rules) is reused.
let normCache: WeakMap<Expr, Poly> | undefined;

function norm(e: Expr): Poly {
  const cached = normCache?.get(e);
  if (cached) return cached;
  const p = recombine(normNode(e));
  normCache?.set(e, p);
  return p;
}

/**
 * `k*c*floorDiv(x, c) + k*mod(x, c)` is `k*x` (Euclid's identity); it appears whenever a tile
 * id is split into (block, offset) and put back together, as in `M_per_rank*src + Tm*local`.
 */
function recombine(p: Poly): Poly {
  for (const [modKey, t] of p.terms) {
    const atom = t.atoms.length === 1 ? t.atoms[0] : undefined;
    if (atom?.op !== "mod" || atom.divisor.op !== "const") continue;
    const want = mulInt(t.coeff, atom.divisor.value);
    if (![...p.terms.values()].some((q) => q.coeff === want && q.atoms.length === 1 && q.atoms[0]?.op === "floorDiv")) continue;
    // The quotient in canonical form (floorDiv(x // b, c) is stored as x // (b*c)).
    const quotient = soleAtom(normDivConst("floorDiv", norm(atom.dividend), atom.divisor.value));
    if (quotient === undefined) continue;
    const qKey = atomKey(quotient);
    const q = p.terms.get(qKey);
    if (q === undefined || q.atoms.length !== 1 || q.coeff !== mulInt(t.coeff, atom.divisor.value)) continue;
    const terms = new Map(p.terms);
    terms.delete(modKey);
    terms.delete(qKey);
    return recombine(addPoly({ constant: p.constant, terms }, scalePoly(norm(atom.dividend), t.coeff)));
  }
  return p;
}

function normNode(e: Expr): Poly {
  switch (e.op) {
    case "const":
      return constPoly(e.value);
    case "var":
      if (e.range.min === e.range.max) return constPoly(e.range.min);
      return atomPoly({ op: "var", name: e.name, range: { min: e.range.min, max: e.range.max } });
    case "add":
      return e.args.map(norm).reduce(addPoly, constPoly(0));
    case "mul":
      return e.args.map(norm).reduce(mulPoly, constPoly(1));
    case "min":
    case "max":
      if (e.args.length === 0) throw new MappingError("invalid-expression", `${e.op} needs at least one operand`);
      return normExtremum(e.op, e.args.map(norm));
    case "floorDiv":
    case "ceilDiv":
    case "mod":
      return normDiv(e.op, norm(e.dividend), norm(e.divisor));
    default:
      throw new MappingError("invalid-expression", `unknown expression node ${JSON.stringify(e)}`);
  }
}

const polyBounds = (p: Poly) => bounds(polyToExpr(p));

function normDiv(op: DivExpr["op"], a: Poly, d: Poly): Poly {
  if (isConstant(d)) {
    const c = d.constant;
    if (c === 0) throw new MappingError("division-by-zero", `${op} by a divisor that simplifies to 0`);
    // Negative constant divisors are turned positive: a // -c = (-a) // c, a % -c = -((-a) % c).
    if (c < 0) {
      const q = normDivConst(op, scalePoly(a, -1), -c);
      return op === "mod" ? scalePoly(q, -1) : q;
    }
    return normDivConst(op, a, c);
  }
  const atom = (): Poly => atomPoly({ op, dividend: polyToExpr(a), divisor: polyToExpr(d) });
  if (isConstant(a) && a.constant === 0) return constPoly(0);
  const bd = polyBounds(d);
  const ba = polyBounds(a);
  if (bd.min > 0 && ba.min >= 0 && ba.max < bd.min) {
    if (op === "floorDiv") return constPoly(0);
    if (op === "mod") return a;
    if (ba.min >= 1) return constPoly(1);
  }
  return atom();
}

function normDivConst(op: DivExpr["op"], a: Poly, c: number): Poly {
  if (isConstant(a)) {
    const f = op === "floorDiv" ? floorDivInt : op === "ceilDiv" ? ceilDivInt : modInt;
    return constPoly(f(a.constant, c));
  }
  if (c === 1) return op === "mod" ? constPoly(0) : a;

  // Split a = c*q + r: terms whose coefficient c divides go to q, the constant splits by floor.
  let q = constPoly(floorDivInt(a.constant, c));
  const rTerms = new Map<string, Term>();
  for (const [k, t] of a.terms) {
    if (t.coeff % c === 0) q = addPoly(q, { constant: 0, terms: new Map([[k, { coeff: t.coeff / c, atoms: t.atoms }]]) });
    else rTerms.set(k, t);
  }
  let r: Poly = { constant: modInt(a.constant, c), terms: rTerms };
  const outer = op === "mod" ? constPoly(0) : q;

  // A common factor g of every coefficient and the divisor cancels (times g for mod).
  let g = gcd(r.constant, c);
  for (const t of r.terms.values()) g = gcd(g, t.coeff);
  let factor = 1;
  if (g > 1) {
    r = divideExact(r, g);
    c /= g;
    if (op === "mod") factor = g;
    if (c === 1) return addPoly(outer, op === "mod" ? constPoly(0) : r);
  }
  if (isConstant(r)) return addPoly(outer, scalePoly(normDivConst(op, r, c), factor));

  // When the ranges keep r inside one period, the quotient is a constant.
  const b = polyBounds(r);
  if (op === "ceilDiv") {
    const k = ceilDivInt(b.min, c);
    if (k === ceilDivInt(b.max, c)) return addPoly(outer, constPoly(k));
  } else {
    const k = floorDivInt(b.min, c);
    if (k === floorDivInt(b.max, c)) {
      if (op === "floorDiv") return addPoly(outer, constPoly(k));
      return scalePoly(addPoly(r, constPoly(-mulInt(k, c))), factor);
    }
  }

  // Nested divisions by positive constants compose: floor(floor(x / a) / b) = floor(x / (a*b)),
  // likewise for ceil; mod(mod(x, a), b) = mod(x, b) when b divides a.
  const inner = soleAtom(r);
  if (inner && inner.op === op && inner.divisor.op === "const" && inner.divisor.value > 0) {
    const a2 = inner.divisor.value;
    if (op !== "mod") return addPoly(outer, normDivConst(op, norm(inner.dividend), mulInt(a2, c)));
    if (a2 % c === 0) return scalePoly(normDivConst(op, norm(inner.dividend), c), factor);
  }
  // floor(mod(x, a) / c) = mod(floor(x / c), a / c) when c divides a.
  if (op === "floorDiv" && inner?.op === "mod" && inner.divisor.op === "const" && inner.divisor.value % c === 0) {
    return addPoly(outer, normDivConst("mod", normDivConst("floorDiv", norm(inner.dividend), c), inner.divisor.value / c));
  }
  const atom = atomPoly({ op, dividend: polyToExpr(r), divisor: { op: "const", value: c } });
  return addPoly(outer, scalePoly(atom, factor));
}

function divideExact(p: Poly, g: number): Poly {
  const terms = new Map<string, Term>();
  for (const [k, t] of p.terms) terms.set(k, { coeff: t.coeff / g, atoms: t.atoms });
  return { constant: p.constant / g, terms };
}

function normExtremum(op: "min" | "max", args: Poly[]): Poly {
  // Flatten nested extrema of the same kind and fold the constants into one operand.
  const flat: Poly[] = [];
  let folded: number | undefined;
  for (const p of args) {
    const atom = soleAtom(p);
    if (atom && atom.op === op) flat.push(...atom.args.map(norm));
    else flat.push(p);
  }
  const rest: Poly[] = [];
  for (const p of flat) {
    if (isConstant(p)) folded = folded === undefined ? p.constant : (op === "min" ? Math.min : Math.max)(folded, p.constant);
    else rest.push(p);
  }
  if (folded !== undefined) rest.push(constPoly(folded));

  // Operands in canonical order; an operand that the ranges prove never wins is dropped.
  const unique = new Map<string, { p: Poly; e: Expr }>();
  for (const p of rest) {
    const e = polyToExpr(p);
    unique.set(atomKey(e), { p, e });
  }
  const ordered = [...unique.values()].sort((a, b) => compareExprs(a.e, b.e)).map(({ p }) => p);
  const beats = (x: Poly, y: Poly): boolean => {
    // x makes y redundant: x <= y always (min) or x >= y always (max).
    const diff = polyBounds(addPoly(x, scalePoly(y, -1)));
    return op === "min" ? diff.max <= 0 : diff.min >= 0;
  };
  const kept: Poly[] = [];
  for (const p of ordered) {
    if (kept.some((k) => beats(k, p))) continue;
    for (let i = kept.length - 1; i >= 0; i--) if (beats(p, kept[i] as Poly)) kept.splice(i, 1);
    kept.push(p);
  }
  if (kept.length === 1) return kept[0] as Poly;
  return atomPoly({ op, args: kept.map(polyToExpr) });
}
