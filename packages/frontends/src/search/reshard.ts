// Mercury Algorithm 1 (§7.4): graph-level search over an operator DAG, choosing one
// sharding candidate per operator to minimise execution plus resharding cost, where a
// resharding cost is the alpha-beta cost of the collective the partition IR infers.
import { type Mesh, regionBytes, type TensorDecl } from "@ovl/chunk-plan";
import { FrontendError } from "../errors.js";
import { inferCollective } from "../partition/infer.js";
import { rankRegion, type ShardingSpec, toMesh } from "../partition/spec.js";
import { type Hardware, levelLink } from "./cost.js";

/** One way to run an operator: its execution cost and the shardings it expects and produces. */
export interface OperatorCandidate {
  readonly name: string;
  /** Execution cost (seconds for the analytic model), e.g. a schedule search's best for this sharding. */
  readonly execCost: number;
  /** Expected sharding of each input, by the producing operator's output tensor name. */
  readonly inputs: Readonly<Record<string, ShardingSpec>>;
  /** Sharding of the output. */
  readonly output: ShardingSpec;
}

/** An operator of the DAG: its output tensor and its candidates. */
export interface OperatorNode {
  readonly name: string;
  readonly output: TensorDecl;
  readonly candidates: readonly OperatorCandidate[];
}

/** An operator DAG; an edge says `to` reads `from`'s output. */
export interface OperatorDag {
  readonly ops: readonly OperatorNode[];
  readonly edges: readonly { readonly from: string; readonly to: string }[];
}

/** Cost of resharding `tensor` from `before` to `after`. */
export type ReshardCost = (tensor: TensorDecl, mesh: Mesh, before: ShardingSpec, after: ShardingSpec) => number;

/**
 * The alpha-beta cost of the collective a reshard implies, per changed mesh axis over that
 * axis's link, from the bytes one rank holds before it (`m`) and the axis size `n`:
 * all-gather `(n-1)(α + m/β)`; reduce-scatter and all-to-all `(n-1)(α + m/(nβ))`;
 * all-reduce twice that; slicing a replica is free. Changed axes are summed.
 */
export function alphaBetaReshard(hw: Hardware): ReshardCost {
  return (tensor, mesh, before, after) => {
    const implied = inferCollective(tensor, mesh, before, after);
    const m = regionBytes(rankRegion(tensor, mesh, before, 0), tensor);
    return implied.meshAxes.reduce((acc, a, k) => {
      const n = mesh.shape[a]!;
      const link = levelLink(mesh.shape, a, hw);
      const t = implied.perAxis[k]!;
      const step = t === "all-gather" ? link.latency + m / link.bandwidth : link.latency + m / n / link.bandwidth;
      const steps = t === "slice" || t === "none" ? 0 : t === "all-reduce" ? 2 * (n - 1) : n - 1;
      return acc + steps * step;
    }, 0);
  };
}

/** Options of {@link searchResharding}. */
export interface ReshardSearchOptions {
  readonly mesh: Mesh | readonly number[];
  readonly hardware: Hardware;
  /** Default {@link alphaBetaReshard}. */
  readonly reshardCost?: ReshardCost;
  /** Refuse DAGs with more full assignments than this (default 1e6); Algorithm 1 is exhaustive. */
  readonly maxAssignments?: number;
}

/** The chosen configuration and its cost breakdown. */
export interface ReshardSearchResult {
  /** Operator name → chosen candidate name. */
  readonly choice: Readonly<Record<string, string>>;
  readonly cost: number;
  readonly execCost: number;
  readonly reshardCost: number;
  /** Full assignments evaluated. */
  readonly evaluated: number;
}

/**
 * Algorithm 1: for every full assignment of candidates, sum each operator's execution cost
 * and, for each predecessor, the cost of resharding the predecessor's output into the
 * sharding this operator expects; keep the minimum (ties: the first in candidate order).
 */
export function searchResharding(dag: OperatorDag, o: ReshardSearchOptions): ReshardSearchResult {
  const mesh = toMesh(o.mesh);
  const reshard = o.reshardCost ?? alphaBetaReshard(o.hardware);
  const index = new Map(dag.ops.map((op, i) => [op.name, i]));
  const preds = dag.ops.map(() => [] as number[]);
  for (const e of dag.edges) {
    const from = index.get(e.from);
    const to = index.get(e.to);
    if (from === undefined || to === undefined)
      throw new FrontendError("invalid-spec", `edge ${e.from} → ${e.to} names an operator the DAG does not have`);
    preds[to]!.push(from);
  }
  const total = dag.ops.reduce((a, op) => a * op.candidates.length, 1);
  if (total === 0) throw new FrontendError("invalid-spec", "every operator needs at least one candidate");
  if (total > (o.maxAssignments ?? 1e6))
    throw new FrontendError("search-too-large", `${total} assignments exceed maxAssignments; prune candidates first`);
  // Edge costs depend only on the pair of candidates: compute each once.
  const edgeCost = new Map<string, number>();
  const costOf = (k: number, jk: number, i: number, ji: number): number => {
    const key = `${k}.${jk}>${i}.${ji}`;
    let c = edgeCost.get(key);
    if (c === undefined) {
      const producer = dag.ops[k]!;
      const want = dag.ops[i]!.candidates[ji]!.inputs[producer.output.name];
      if (want === undefined)
        throw new FrontendError(
          "invalid-spec",
          `candidate ${dag.ops[i]!.candidates[ji]!.name} of ${dag.ops[i]!.name} gives no sharding for input ${producer.output.name}`,
        );
      c = reshard(producer.output, mesh, producer.candidates[jk]!.output, want);
      edgeCost.set(key, c);
    }
    return c;
  };
  let best: ReshardSearchResult | undefined;
  const pick = dag.ops.map(() => 0);
  for (let n = 0; n < total; n++) {
    let rest = n;
    for (let i = dag.ops.length - 1; i >= 0; i--) {
      const len = dag.ops[i]!.candidates.length;
      pick[i] = rest % len;
      rest = Math.floor(rest / len);
    }
    let exec = 0;
    let resh = 0;
    dag.ops.forEach((op, i) => {
      exec += op.candidates[pick[i]!]!.execCost;
      for (const k of preds[i]!) resh += costOf(k, pick[k]!, i, pick[i]!);
    });
    if (best === undefined || exec + resh < best.cost) {
      best = {
        choice: Object.fromEntries(dag.ops.map((op, i) => [op.name, op.candidates[pick[i]!]!.name])),
        cost: exec + resh,
        execCost: exec,
        reshardCost: resh,
        evaluated: total,
      };
    }
  }
  return best!;
}
