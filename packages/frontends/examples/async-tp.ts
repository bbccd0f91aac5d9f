// Mercury's async-TP GEMM (the schedule search's AsyncTP candidate) from CommIR to a running
// manifest: N parallel over the ranks (column-parallel weights), row blocks of A passed
// around a ring (a shift of M). lowerProgram turns the ring into pulls, each forwarding step
// waiting on the peer's previous pull; compile() realises it on the copy engine with the
// built-in TMA GEMM body.
//
//   pnpm --filter @ovl/frontends example:async-tp [out-dir (default: $TMPDIR/ovl-examples/async_tp)] [world (default 4)]
import { asyncTpGemm, gemmProgram, lowerProgram } from "../src/index.js";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { compileAndWrite } from "./common.js";

/** The lowered AsyncTP plan of `C[M, N] = A[M, K] @ B[K, N]` on `world` ranks. */
export function asyncTpPlan(world: number, M: number, N: number, K: number) {
  const program = asyncTpGemm(gemmProgram(M, N, K, "bf16"), world);
  return lowerProgram(program, [world]).plan;
}

const out = process.argv[2] ?? join(tmpdir(), "ovl-examples", "async_tp");
const world = Number(process.argv[3] ?? 4);
// Each rank's GEMM multiplies the gathered A by its column block of B: N columns of N · world.
const shape = { world, M: 64 * world, N: 32, K: 64 };
await compileAndWrite("async_tp", asyncTpPlan(world, shape.M, shape.N * world, shape.K), shape, out);
