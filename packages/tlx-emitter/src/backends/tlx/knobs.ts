// An operator's warp-specialisation knobs as the TLX emitters take them: the consumer
// schedule, ring depth, epilogue split and cluster from `op.warpSpecialization`, and the
// operator's other options without the Triton-only launch knobs (warps, stages).
import type { Operator } from "../../core/operator.js";
import type { EmitOptions } from "../../core/options.js";

/** `op.options` less `backend` (returned apart), `numWarps` and `numStages`, and the TLX knobs of `op.warpSpecialization`. */
export function tlxKnobs(op: Operator): {
  readonly rest: Omit<EmitOptions, "backend" | "numWarps" | "numStages">;
  readonly transfers: EmitOptions["backend"];
  readonly knobs: { consumerSchedule?: "cooperative" | "pingpong"; stages?: number; epilogueSplit?: number; clusterM?: number };
} {
  const { backend: transfers, numWarps: _w, numStages: _s, ...rest } = op.options ?? {};
  const ws = op.warpSpecialization;
  const knobs = {
    ...(ws === undefined ? {} : { consumerSchedule: ws.consumerSchedule }),
    ...(ws?.stages === undefined ? {} : { stages: ws.stages }),
    ...(ws?.epilogueSplit === undefined ? {} : { epilogueSplit: ws.epilogueSplit }),
    ...(ws?.clusterM === undefined ? {} : { clusterM: ws.clusterM }),
  };
  return { rest, transfers, knobs };
}
