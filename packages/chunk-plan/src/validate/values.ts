// Symbolic chunk values: what an atom of a buffer holds, as an interned integer id. A value
// is the initial contents of some rank's region ("shard of rank r", positioned by a
// shift), or a reduction of such terms kept as a sorted multiset of contributors.
import type { Reduction } from "../model/schema.js";

/** Id of the value of an atom nothing has written: garbage. */
export const UNWRITTEN = 0;

interface InitValue {
  kind: "init";
  rank: number;
  tensor: number;
  /** Element at position p of the holding tensor is the origin's element at p - shift. */
  shift: readonly number[];
}

interface ReducedValue {
  kind: "reduce";
  op: Reduction;
  /** Sorted ids of the combined terms (init values or reductions of another kind). */
  terms: readonly number[];
  /** True when some term occurs twice: a contribution was combined more than once. */
  repeated: boolean;
}

type Value = InitValue | ReducedValue;

/** Interning table of symbolic values; ids are stable within one validation. */
export class ValueTable {
  private readonly values: (Value | undefined)[] = [undefined];
  private readonly ids = new Map<string, number>();

  private intern(key: string, make: () => Value): number {
    let id = this.ids.get(key);
    if (id === undefined) {
      id = this.values.length;
      this.values.push(make());
      this.ids.set(key, id);
    }
    return id;
  }

  /** The initial contents of `tensor` on `rank`, seen at a position shifted by `shift`. */
  init(rank: number, tensor: number, shift: readonly number[]): number {
    return this.intern(`i${rank}:${tensor}:${shift.join(",")}`, () => ({ kind: "init", rank, tensor, shift: [...shift] }));
  }

  /** The reduction of `terms` (one term is itself; the multiset is order-free). */
  reduced(op: Reduction, terms: number[]): number {
    if (terms.length === 1) return terms[0] ?? UNWRITTEN;
    terms.sort((a, b) => a - b);
    return this.intern(`r${op}:${terms.join(",")}`, () => ({
      kind: "reduce",
      op,
      terms,
      repeated: terms.some((t, k) => k > 0 && terms[k - 1] === t),
    }));
  }

  /** The value moved by `delta` elements (a copy to another place). */
  translate(id: number, delta: readonly number[]): number {
    const v = this.values[id];
    if (v === undefined) return UNWRITTEN;
    if (v.kind === "init")
      return this.init(
        v.rank,
        v.tensor,
        v.shift.map((s, d) => s + (delta[d] ?? 0)),
      );
    return this.reduced(
      v.op,
      v.terms.map((t) => this.translate(t, delta)),
    );
  }

  /** `a op b`: reductions of the same kind flatten into one multiset; garbage stays garbage. */
  combine(op: Reduction, a: number, b: number): number {
    if (a === UNWRITTEN || b === UNWRITTEN) return UNWRITTEN;
    return this.reduced(op, [...this.termsOf(op, a), ...this.termsOf(op, b)]);
  }

  private termsOf(op: Reduction, id: number): readonly number[] {
    const v = this.values[id];
    return v?.kind === "reduce" && v.op === op ? v.terms : [id];
  }

  /** True when the value combines some contribution more than once. */
  repeats(id: number): boolean {
    const v = this.values[id];
    return v?.kind === "reduce" && v.repeated;
  }

  /** Words for an error message: `shard of rank 3 (x, shifted by [4, 0])`, `sum of ...`. */
  describe(id: number, tensorNames: readonly string[]): string {
    const v = this.values[id];
    if (v === undefined) return "nothing (never written)";
    if (v.kind === "init") {
      const moved = v.shift.some((s) => s !== 0) ? `, shifted by [${v.shift.join(", ")}]` : "";
      return `the initial ${tensorNames[v.tensor] ?? "?"} of rank ${v.rank}${moved}`;
    }
    const rankOf = (t: number): number => {
      const term = this.values[t];
      return term?.kind === "init" ? term.rank : Number.MAX_SAFE_INTEGER;
    };
    const ordered = [...v.terms].sort((a, b) => rankOf(a) - rankOf(b));
    const parts = ordered.slice(0, 8).map((t) => this.describe(t, tensorNames));
    const more = v.terms.length > 8 ? `, ... (${v.terms.length} terms)` : "";
    return `${v.op} of {${parts.join("; ")}${more}}`;
  }
}
