// Signal slots of a chunk plan (DESIGN.md "Signals"): allocation per rank, the notify
// table of every op, and the epoch rule that turns a slot into a wait target.
export { SignalError, type SignalErrorCode } from "./errors.js";
export { planSignals } from "./allocate.js";
export { waitTarget, slotsOfRank } from "./wait-target.js";
