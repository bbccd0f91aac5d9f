// The AllGather an `ovl emit` of a gathering operator (ag-attention, ag-moe) builds from its
// flags: one template of three on the mesh, push (default) or pull, `split` chunks a shard,
// copy-engine transfers only.
import { allGatherHierarchical, allGatherRing, allGatherSwizzle, planSignals, type ChunkPlan, type TensorDecl } from "@ovl/chunk-plan";
import { UsageError } from "../errors.js";
import { parseMesh } from "../problem.js";

/** The gather flags both commands read. */
export interface GatherFlags {
  world?: number;
  mesh?: string;
  template?: string;
  side?: string;
  split?: number;
  backend?: string;
}

const TEMPLATES = ["swizzle", "ring", "hierarchical"] as const;

/**
 * The signalled AllGather of `tensor` along rows that the flags name; `operator` and `what`
 * (what it gathers) word the refusals.
 * @throws {UsageError} an unknown template, a backend other than the copy engine, a side other than push or pull.
 */
export function gatherPlan(f: GatherFlags, tensor: TensorDecl, operator: string, what: string): ChunkPlan {
  const template = f.template ?? "swizzle";
  if (!(TEMPLATES as readonly string[]).includes(template)) {
    throw new UsageError("unknown-template", `${operator} gathers ${what} with ${TEMPLATES.join(", ")}, not '${template}'`);
  }
  if (f.backend !== undefined && f.backend !== "copy-engine")
    throw new UsageError("unsupported", `${operator} gathers ${what} with copy-engine transfers only; drop --backend`);
  const side = f.side ?? "push";
  if (side !== "push" && side !== "pull") throw new UsageError("usage", `--side is push or pull, not '${side}'`);
  const base = { tensor, axis: 0, mesh: parseMesh(f), split: f.split ?? 2 };
  const plan =
    template === "hierarchical"
      ? allGatherHierarchical({ ...base, schedule: "pipelined" })
      : template === "ring"
        ? allGatherRing({ ...base, side })
        : allGatherSwizzle({ ...base, side });
  return planSignals(plan);
}
