// The per-rank GEMMs of the MLP suite (TileLink Table 4) at worlds 2, 4 and 8, as the compute
// kernel of each overlapped operator sees them: AG+GEMM's consumer multiplies the gathered
// tokens by its column shard of the first weight (M = S, N = I/W, K = H); GEMM+RS's producer
// multiplies them by its row shard of the second (M = S, N = H, K = I/W).
import { MLP_SHAPES, type ComputeRole, type MlpShapeName } from "../../src/index.js";

/** One per-rank GEMM of the suite. */
export interface ComputeShape {
  /** e.g. `ag_mlp1_w4`. */
  readonly name: string;
  readonly op: "ag-gemm" | "gemm-rs";
  readonly role: ComputeRole;
  readonly mlp: MlpShapeName;
  readonly world: number;
  readonly M: number;
  readonly N: number;
  readonly K: number;
}

/** Every per-rank GEMM of MLP-1…6 at `worlds`, AG+GEMM first. */
export function computeShapes(worlds: readonly number[] = [2, 4, 8]): ComputeShape[] {
  const out: ComputeShape[] = [];
  for (const op of ["ag-gemm", "gemm-rs"] as const) {
    for (const [mlp, s] of Object.entries(MLP_SHAPES) as [MlpShapeName, (typeof MLP_SHAPES)[MlpShapeName]][]) {
      for (const world of worlds) {
        const shard = s.I / world;
        if (!Number.isInteger(shard)) throw new Error(`${mlp}: I = ${s.I} does not split over ${world} ranks`);
        const tag = `${op === "ag-gemm" ? "ag" : "rs"}_${mlp.replace("-", "").toLowerCase()}_w${world}`;
        out.push(
          op === "ag-gemm"
            ? { name: tag, op, role: "consumer", mlp, world, M: s.S, N: shard, K: s.H }
            : { name: tag, op, role: "producer", mlp, world, M: s.S, N: s.H, K: shard },
        );
      }
    }
  }
  return out;
}
