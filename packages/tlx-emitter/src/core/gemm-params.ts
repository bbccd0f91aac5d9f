// An operator's GEMM tiling as the kernel templates check it: its problem's sizes, its tile and its group size.
import { checkGemmParams, type GemmParams } from "../backends/triton/kernels/index.js";
import { DEFAULT_GROUP_M, type Operator } from "./operator.js";

/** An operator's GEMM parameters at its problem's M: its tile and `groupM` (else `DEFAULT_GROUP_M`). @throws {EmitError} as `checkGemmParams`. */
export function operatorGemmParams(op: Pick<Operator, "problem" | "tile" | "groupM">): GemmParams {
  const { M, N, K } = op.problem;
  return checkGemmParams({
    M,
    N,
    K,
    BLOCK_M: op.tile.BM,
    BLOCK_N: op.tile.BN,
    BLOCK_K: op.tile.BK,
    GROUP_M: op.groupM ?? DEFAULT_GROUP_M,
  });
}
