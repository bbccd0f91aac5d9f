// Per-rank buffer state over atoms: which atoms a rank holds at start, which op wrote each
// atom (plain writes) or combined into it (reductions), and the symbolic value it holds.
// Typed arrays per (rank, tensor), allocated on first touch.
import type { PlanAtoms } from "./plan-atoms.js";

/** State of one tensor's buffer on one rank, indexed by flat atom id. */
export interface Buffer {
  /** Bit set per atom the rank holds at start (its `local` regions): see {@link held}. */
  readonly local: Uint8Array;
  /** 1 + id of the first op that plainly writes the atom; 0 when none does. */
  readonly writer: Int32Array;
  /** Ops that reduce into the atom, per atom id (sparse: most atoms have none). */
  readonly reducers: Map<number, number[]>;
  /** Symbolic value id (see ValueTable); 0 = never written. */
  readonly values: Int32Array;
}

/** A buffer whose values are allocated on first use, or take over the writers' array. */
class BufferState implements Buffer {
  readonly local: Uint8Array;
  writer: Int32Array;
  readonly reducers = new Map<number, number[]>();
  private held: Int32Array | undefined;

  constructor(private readonly size: number) {
    this.local = new Uint8Array((size + 7) >> 3);
    this.writer = new Int32Array(size);
  }

  get values(): Int32Array {
    return (this.held ??= new Int32Array(this.size));
  }

  /** Reuses the writers' array for the values (zeroed); the writers are gone after. */
  recycle(): void {
    if (this.held !== undefined) return;
    this.held = this.writer.fill(0);
    this.writer = new Int32Array(0);
  }
}

/** True when atom `f` is marked in the bit set `local` (one bit per atom). */
export function held(local: Uint8Array, f: number): boolean {
  return ((local[f >> 3]! >> (f & 7)) & 1) === 1;
}

/** Marks atom `f` in the bit set `local`. */
export function markHeld(local: Uint8Array, f: number): void {
  local[f >> 3]! |= 1 << (f & 7);
}

/** All buffers of a plan. */
export class Buffers {
  private readonly state: (BufferState | undefined)[];
  private readonly tensors: number;

  constructor(
    private readonly atoms: PlanAtoms,
    world: number,
  ) {
    this.tensors = atoms.grids.length;
    this.state = new Array<BufferState | undefined>(world * this.tensors);
  }

  /** The buffer of `tensor` on `rank`. */
  get(rank: number, tensor: number): Buffer {
    const key = rank * this.tensors + tensor;
    let b = this.state[key];
    if (b === undefined) {
      b = new BufferState(this.atoms.grids[tensor]?.size ?? 0);
      this.state[key] = b;
    }
    return b;
  }

  /**
   * Symbolic execution needs values and no longer the writers (checked by then): each
   * buffer's writer array becomes its value array, so validation holds one array of
   * atom-sized integers per buffer, not two. `writer` reads as empty afterwards.
   */
  recycleWriters(): void {
    for (const b of this.state) b?.recycle();
  }

  /** Buffers touched so far, with their rank and tensor. */
  *touched(): Generator<{ rank: number; tensor: number; buffer: Buffer }> {
    for (let key = 0; key < this.state.length; key++) {
      const buffer = this.state[key];
      if (buffer !== undefined) yield { rank: Math.floor(key / this.tensors), tensor: key % this.tensors, buffer };
    }
  }
}
