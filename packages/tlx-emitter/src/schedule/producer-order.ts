// The GEMM+RS producer's m-block visit order, taken from the order its deliveries are sent:
// the rows that must travel are computed first, chunk by chunk as the comm streams send
// them, and the local slab (whose rows never cross NVLink) last.
import { EmitError } from "../core/writer/index.js";
import type { Delivery } from "./rs-movements.js";

/**
 * The m-blocks rank `rank` computes, in order: those of its deliveries (already in sending
 * order, see `rsDeliveries`), each chunk's m-blocks in row order, each m-block once. With a
 * direct ReduceScatter this is slabs `rank+1, rank+2, …, rank-1` then slab `rank`, so the
 * first chunk can be copied while later ones are still computed.
 * @throws {EmitError} `bad-plan` when the deliveries name an m-block outside
 *   `0..numPidM-1`, or do not cover every m-block of the partial tensor.
 */
export function producerOrder(deliveries: readonly Delivery[], rank: number, numPidM: number): number[] {
  const order: number[] = [];
  const seen = new Set<number>();
  for (const d of deliveries) {
    if (d.from !== rank) continue;
    for (let m = d.mBlock; m < d.mBlock + d.blocks; m++) {
      if (!Number.isInteger(m) || m < 0 || m >= numPidM) {
        throw new EmitError("bad-plan", `rank ${rank} delivers m-block ${m}, outside the partial tensor's 0..${numPidM - 1}`);
      }
      if (!seen.has(m)) {
        seen.add(m);
        order.push(m);
      }
    }
  }
  if (order.length !== numPidM) {
    throw new EmitError(
      "bad-plan",
      `rank ${rank} delivers ${order.length} of ${numPidM} m-blocks; every row of the partial tensor must reach its slab owner`,
    );
  }
  return order;
}
