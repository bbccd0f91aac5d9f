// The canonical polynomial form used by the simplifier: a constant plus a sum of
// coefficient × monomial terms, where a monomial is a sorted product of atoms (variables and
// simplified floorDiv/ceilDiv/mod/min/max nodes). Like terms combine through their keys.
import { addInt, mulInt } from "./arith.js";
import type { Expr } from "./expr.js";

/** One `coeff × atoms[0] × atoms[1] ...` term; atoms sorted by key. */
export interface Term {
  coeff: number;
  atoms: Expr[];
}

/** `constant + Σ terms`, terms keyed by their monomial. No term has coefficient 0. */
export interface Poly {
  constant: number;
  terms: Map<string, Term>;
}

// Keys are memoised per simplify call: atoms are shared by many terms and every key is
// built from its children's keys, so each node is serialised once.
let keyCache: WeakMap<Expr, string> | undefined;

/** Runs `f` with a key cache that lives for the duration of the call. */
export function withKeyCache<T>(f: () => T): T {
  if (keyCache) return f();
  keyCache = new WeakMap();
  try {
    return f();
  } finally {
    keyCache = undefined;
  }
}

/** Canonical, unambiguous text key of an expression (names are identifiers, values integers). */
export function atomKey(e: Expr): string {
  const cached = keyCache?.get(e);
  if (cached !== undefined) return cached;
  let k: string;
  switch (e.op) {
    case "const":
      k = String(e.value);
      break;
    case "var":
      k = `${e.name}[${e.range.min},${e.range.max}]`;
      break;
    case "add":
    case "mul":
    case "min":
    case "max":
      k = `${e.op}(${e.args.map(atomKey).join(",")})`;
      break;
    default:
      k = `${e.op}(${atomKey(e.dividend)},${atomKey(e.divisor)})`;
  }
  keyCache?.set(e, k);
  return k;
}

const monomialKey = (atoms: readonly Expr[]): string => atoms.map(atomKey).join("\u0001");

/** The constant polynomial `c`. */
export const constPoly = (c: number): Poly => ({ constant: c, terms: new Map() });

/** The polynomial `1 × atom`. */
export function atomPoly(atom: Expr): Poly {
  return { constant: 0, terms: new Map([[monomialKey([atom]), { coeff: 1, atoms: [atom] }]]) };
}

/** True when `p` has no terms (only its constant). */
export function isConstant(p: Poly): boolean {
  return p.terms.size === 0;
}

/** The single atom of `p` when `p` is exactly one atom with coefficient 1. */
export function soleAtom(p: Poly): Expr | undefined {
  if (p.constant !== 0 || p.terms.size !== 1) return undefined;
  const [t] = p.terms.values();
  return t && t.coeff === 1 && t.atoms.length === 1 ? t.atoms[0] : undefined;
}

function addTerm(into: Map<string, Term>, key: string, coeff: number, atoms: Expr[]): void {
  const t = into.get(key);
  const c = t ? addInt(t.coeff, coeff) : coeff;
  if (c === 0) into.delete(key);
  else into.set(key, { coeff: c, atoms });
}

/** `a + b`, combining like terms (throws `overflow`). */
export function addPoly(a: Poly, b: Poly): Poly {
  const terms = new Map(a.terms);
  for (const [k, t] of b.terms) addTerm(terms, k, t.coeff, t.atoms);
  return { constant: addInt(a.constant, b.constant), terms };
}

/** `k × a` (throws `overflow`). */
export function scalePoly(a: Poly, k: number): Poly {
  if (k === 0) return constPoly(0);
  const terms = new Map<string, Term>();
  for (const [key, t] of a.terms) terms.set(key, { coeff: mulInt(t.coeff, k), atoms: t.atoms });
  return { constant: mulInt(a.constant, k), terms };
}

/** `a × b`, expanded and combined (throws `overflow`). */
export function mulPoly(a: Poly, b: Poly): Poly {
  let out = addPoly(scalePoly(a, b.constant), { constant: 0, terms: scalePoly(b, a.constant).terms });
  for (const ta of a.terms.values()) {
    for (const tb of b.terms.values()) {
      const atoms = [...ta.atoms, ...tb.atoms].sort(compareAtoms);
      const terms = new Map<string, Term>();
      addTerm(terms, monomialKey(atoms), mulInt(ta.coeff, tb.coeff), atoms);
      out = addPoly(out, { constant: 0, terms });
    }
  }
  return out;
}

function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Sort key that puts variables (by name) before compound atoms and constants last. */
export function orderKey(e: Expr): string {
  if (e.op === "var") return `0${e.name}`;
  if (e.op === "const") return `2${e.value}`;
  return `1${atomKey(e)}`;
}

/** Canonical order of atoms inside a monomial. */
export function compareAtoms(a: Expr, b: Expr): number {
  return compareStrings(orderKey(a), orderKey(b));
}

/** Canonical order of operands of min/max. */
export function compareExprs(a: Expr, b: Expr): number {
  return compareStrings(orderKey(a), orderKey(b));
}

/** Terms in canonical order: by degree, then by monomial key. */
export function sortedTerms(p: Poly): Term[] {
  const keyed = [...p.terms.values()].map((t) => ({ t, k: t.atoms.map(orderKey).join("\u0001") }));
  return keyed.sort((a, b) => a.t.atoms.length - b.t.atoms.length || compareStrings(a.k, b.k)).map(({ t }) => t);
}

function termExpr(t: Term): Expr {
  if (t.coeff === 1 && t.atoms.length === 1) return t.atoms[0] as Expr;
  if (t.coeff === 1) return { op: "mul", args: [...t.atoms] };
  return { op: "mul", args: [{ op: "const", value: t.coeff }, ...t.atoms] };
}

/** The canonical expression of `p`: terms in order, the constant last. */
export function polyToExpr(p: Poly): Expr {
  const parts = sortedTerms(p).map(termExpr);
  if (p.constant !== 0 || parts.length === 0) parts.push({ op: "const", value: p.constant });
  return parts.length === 1 ? (parts[0] as Expr) : { op: "add", args: parts };
}
