// The monotone-epoch signal arithmetic of DESIGN.md, identical to the Python runner's
// `ovl_runtime.signals`: slots are never reset, launch k waits for k × arrivals, and
// counters wrap, so "reached" is decided with serial-number arithmetic (RFC 1982).
import type { SignalWidth } from "../model/common.js";

/** What was wrong with an argument of the signal arithmetic. */
export type SignalErrorCode = "bad-width" | "bad-epoch" | "bad-arrivals" | "bad-add" | "not-an-integer";

/** Bad input to the signal arithmetic (a width other than 32/64, an epoch below 1, ...). */
export class SignalError extends Error {
  /** Which argument was wrong. */
  readonly code: SignalErrorCode;

  constructor(code: SignalErrorCode, message: string) {
    super(message);
    this.name = "SignalError";
    this.code = code;
  }
}

function modulusOf(bits: number): bigint {
  if (bits !== 32 && bits !== 64) {
    throw new SignalError("bad-width", `signal width must be 32 or 64 bits, got ${String(bits)}`);
  }
  return 1n << BigInt(bits);
}

function integer(x: number | bigint, what: string): bigint {
  if (typeof x === "bigint") return x;
  if (!Number.isSafeInteger(x)) {
    throw new SignalError("not-an-integer", `${what} must be a safe integer or a bigint, got ${String(x)}`);
  }
  return BigInt(x);
}

// Python's `%` takes the sign of the divisor; bigint `%` takes the dividend's.
function mod(x: bigint, m: bigint): bigint {
  const r = x % m;
  return r < 0n ? r + m : r;
}

/**
 * The value a wait of launch `epoch` (1-based) targets on a slot that receives `arrivals`
 * per launch: `epoch × arrivals mod 2^bits`. "The k-th launch of an overlapped operator
 * waits for `value >= k * arrivals`" (DESIGN.md, Signals).
 *
 * @throws SignalError when `epoch < 1`, `arrivals < 1`, or `bits` is not 32 or 64.
 */
export function epochTarget(epoch: number | bigint, arrivals: number | bigint, bits: SignalWidth = 32): bigint {
  const m = modulusOf(bits);
  const e = integer(epoch, "epoch");
  const a = integer(arrivals, "arrivals");
  if (e < 1n) throw new SignalError("bad-epoch", `epoch must be an integer >= 1 (launches count from 1), got ${e}`);
  if (a < 1n) throw new SignalError("bad-arrivals", `arrivals must be an integer >= 1, got ${a}`);
  return mod(e * a, m);
}

/**
 * Whether a wrapping counter at `value` has reached `target`: `((value - target) mod
 * 2^bits) < 2^(bits-1)`, so a counter that wrapped past zero still compares as ahead. The
 * emitted device code and the Python runner compare exactly this way.
 *
 * @throws SignalError when `bits` is not 32 or 64 or an argument is not an integer.
 */
export function reached(value: number | bigint, target: number | bigint, bits: SignalWidth = 32): boolean {
  const m = modulusOf(bits);
  return mod(integer(value, "value") - integer(target, "target"), m) < m >> 1n;
}

/**
 * The value of a slot after one notify: a release add of `add` (default 1) that wraps at
 * 2^bits. A notify never writes an absolute value, which is what lets slots go unreset.
 *
 * @throws SignalError when `add < 1` or `bits` is not 32 or 64.
 */
export function afterNotify(value: number | bigint, add: number | bigint = 1, bits: SignalWidth = 32): bigint {
  const m = modulusOf(bits);
  const a = integer(add, "add");
  if (a < 1n) throw new SignalError("bad-add", `notify must add at least 1, got ${a}`);
  return mod(integer(value, "value") + a, m);
}
