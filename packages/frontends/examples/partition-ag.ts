// The partition IR on the product path: a row-sharded activation X [M, K] resharded to
// replicated for a column-parallel GEMM (every rank multiplies all of X by its column block
// of the weights). inferCollective names the AllGather; the direct path inserts it as one
// `collective` op per rank, which compile() decomposes into pushes of each shard to every
// peer before the copy engine realises them.
//
//   pnpm --filter @ovl/frontends example:partition [out-dir (default: $TMPDIR/ovl-examples/partition_ag)] [world (default 4)]
import { lowerReshard, replicate, shard } from "../src/index.js";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { compileAndWrite } from "./common.js";

/** The lowered reshard of X [M, K] from row-sharded to replicated on `world` ranks. */
export function gatherPlan(world: number, M: number, K: number) {
  const lowered = lowerReshard({
    tensor: { name: "X", shape: [M, K], dtype: "bf16" },
    mesh: [world],
    before: [shard(0)],
    after: [replicate()],
    path: "direct",
  });
  console.log(`implied collective: ${lowered.implied.kind} (${lowered.path} path)`);
  return lowered.plan;
}

const out = process.argv[2] ?? join(tmpdir(), "ovl-examples", "partition_ag");
const world = Number(process.argv[3] ?? 4);
const shape = { world, M: 64 * world, N: 64, K: 64 };
await compileAndWrite("partition_ag", gatherPlan(world, shape.M, shape.K), shape, out);
