// The GEMM+AllReduce candidates of the tuner: every overlapped point of the space realised
// as the partitioned AllReduce (ReduceScatter, reduction after the GEMM, AllGather), and its
// SM points also as DistFuse's tile-wise AllReduce (per-tile flags, reduction on the
// communication SMs while the GEMM runs, broadcast of each reduced tile).
import { enumerateCandidates, type Candidate, type OverlappedCandidate, type TuneProblem, type TuneSpace } from "./space.js";

/** The realisations of a GEMM+AllReduce the compiler emits. */
export const ALL_REDUCE_VARIANTS = ["partitioned", "tilewise"] as const;
/** A realisation of a GEMM+AllReduce. */
export type AllReduceVariant = (typeof ALL_REDUCE_VARIANTS)[number];

/**
 * The candidates of `space` for a GEMM+AllReduce `problem`: each overlapped point as a
 * partitioned AllReduce at its split; each SM point (tile, SMs, swizzle) once more as a
 * tile-wise AllReduce, whose flags are per tile whatever the split: it is priced (by
 * `candidatePlan`) on the partitioned plan cut into one chunk per m-block of its tile (split
 * `M / world / BM`, the rows one flag's tiles cover), its reduction running on its
 * communication SMs beside the GEMM (`simulatorCost`). A tile whose m-blocks do not divide a
 * rank's rows gets split 1 there, and `chunkMisfit` prunes it. Then the non-overlapped path.
 */
export function allReduceCandidates(problem: TuneProblem, space: TuneSpace): Candidate[] {
  const base = enumerateCandidates(space);
  const overlapped = base.filter((c): c is OverlappedCandidate => c.path === "overlapped");
  const out: Candidate[] = overlapped.map((c) => ({ ...c, allReduce: "partitioned" as const }));
  const rows = problem.M / problem.world;
  const seen = new Set<string>();
  for (const c of overlapped) {
    if (c.backend !== "sm") continue;
    const key = `${c.commSms}|${c.tile.BM}x${c.tile.BN}x${c.tile.BK}|${c.groupSizeM}`;
    if (seen.has(key)) continue;
    seen.add(key);
    const split = Number.isInteger(rows / c.tile.BM) && rows >= c.tile.BM ? rows / c.tile.BM : 1;
    out.push({ ...c, split, allReduce: "tilewise" });
  }
  return [...out, ...base.filter((c) => c.path === "sequential")];
}
