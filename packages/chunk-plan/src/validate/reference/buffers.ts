// Reference copy (test oracle): the validator as it was before its per-op arrays, region
// interning and CSR rewrite, kept so a property test can check that the fast path reports
// exactly what this straightforward version reports. Not part of the package's surface.
// Per-rank buffer state over atoms: which atoms a rank holds at start, which op wrote each
// atom (plain writes) or combined into it (reductions), and the symbolic value it holds.
// Typed arrays per (rank, tensor), allocated on first touch.
import type { PlanAtoms } from "./plan-atoms.js";

/** State of one tensor's buffer on one rank, indexed by flat atom id. */
export interface Buffer {
  /** 1 where the atom is in the rank's `local` regions. */
  readonly local: Uint8Array;
  /** 1 + id of the first op that plainly writes the atom; 0 when none does. */
  readonly writer: Int32Array;
  /** Ops that reduce into the atom, per atom id (sparse: most atoms have none). */
  readonly reducers: Map<number, number[]>;
  /** Symbolic value id (see ValueTable); 0 = never written. */
  readonly values: Int32Array;
}

/** All buffers of a plan. */
export class Buffers {
  private readonly state: (Buffer | undefined)[];
  private readonly tensors: number;

  constructor(
    private readonly atoms: PlanAtoms,
    world: number,
  ) {
    this.tensors = atoms.grids.length;
    this.state = new Array<Buffer | undefined>(world * this.tensors);
  }

  /** The buffer of `tensor` on `rank`. */
  get(rank: number, tensor: number): Buffer {
    const key = rank * this.tensors + tensor;
    let b = this.state[key];
    if (b === undefined) {
      const size = this.atoms.grids[tensor]?.size ?? 0;
      b = { local: new Uint8Array(size), writer: new Int32Array(size), reducers: new Map(), values: new Int32Array(size) };
      this.state[key] = b;
    }
    return b;
  }

  /** Buffers touched so far, with their rank and tensor. */
  *touched(): Generator<{ rank: number; tensor: number; buffer: Buffer }> {
    for (let key = 0; key < this.state.length; key++) {
      const buffer = this.state[key];
      if (buffer !== undefined) yield { rank: Math.floor(key / this.tensors), tensor: key % this.tensors, buffer };
    }
  }
}
