// A readable text dump of a plan: per rank, per stream, one line per op with its regions,
// peer, reduction, dependencies and label; meant for diffs, logs and review.
import type { ChunkPlan, Dependency, Op, Region, SignalRef } from "../model/schema.js";

/** `A[0:128, 0:64]`: the tensor and its half-open interval per axis. */
export function formatRegionText(region: Region): string {
  const axes = region.offsets.map((o, d) => `${o}:${o + (region.sizes[d] ?? 0)}`);
  return `${region.tensor}[${axes.join(", ")}]`;
}

/** `r0.s1#2` for an op dependency, `compute r1 A[0:4, 0:8]` for a compute event. */
export function formatDependency(dep: Dependency): string {
  return dep.kind === "op" ? `r${dep.rank}.s${dep.stream}#${dep.index}` : `compute r${dep.rank} ${formatRegionText(dep.region)}`;
}

function sameBox(a: Region, b: Region): boolean {
  return formatRegionText(a) === formatRegionText(b);
}

/**
 * What an op does, without position or dependencies:
 * `pull  A[4:8, 0:6] <- r3`, `push+sum  S[0:4, 0:6] -> r1 C[0:4, 0:6]`,
 * `copy  C[0:4, 0:6] <- S[0:4, 0:6]`, `all-reduce+sum  C[..] <- S[..]  over r[0, 1] axis 0`.
 * A peer's region is written after the peer only when it differs from this side's.
 */
export function describeOp(op: Op): string {
  const verb = (name: string): string => {
    const full = op.reduce === undefined ? name : `${name}+${op.reduce}`;
    return `${full.padEnd(5)} `;
  };
  switch (op.kind) {
    case "p2p": {
      if (op.side === "pull") {
        const from = sameBox(op.src, op.dst) ? "" : ` ${formatRegionText(op.src)}`;
        return `${verb("pull")}${formatRegionText(op.dst)} <- r${op.peer}${from}`;
      }
      const to = sameBox(op.src, op.dst) ? "" : ` ${formatRegionText(op.dst)}`;
      return `${verb("push")}${formatRegionText(op.src)} -> r${op.peer}${to}`;
    }
    case "local-copy":
      return `${verb("copy")}${formatRegionText(op.dst)} <- ${formatRegionText(op.src)}`;
    case "collective":
      return `${verb(op.collective)}${formatRegionText(op.dst)} <- ${formatRegionText(op.src)}  over r[${op.ranks.join(", ")}] axis ${op.axis}`;
  }
}

function formatSignal(ref: SignalRef | null | undefined): string {
  return ref === null || ref === undefined ? "" : `  notify r${ref.rank}/slot${ref.slot}`;
}

/**
 * The plan as text: a header (name, mesh, tensors, claim), then per rank its local regions
 * and one line per op, e.g. `r0 s0 #2 pull  A[1024:2048, 0:4096] <- r3  after r0.s0#1  # ring step 2`
 * (position, {@link describeOp}, dependencies, the signal it notifies if planned, label).
 */
export function dumpPlan(plan: ChunkPlan): string {
  const lines: string[] = [];
  const world = plan.mesh.shape.reduce((a, b) => a * b, 1);
  lines.push(`plan ${plan.name}  mesh [${plan.mesh.shape.join(", ")}]  world ${world}`);
  for (const t of plan.tensors) {
    const strides = t.strides === undefined ? "" : `  strides [${t.strides.join(", ")}]`;
    lines.push(`tensor ${t.name} ${t.dtype} [${t.shape.join(", ")}]${strides}`);
  }
  if (plan.claim !== undefined) {
    const c = plan.claim;
    const src = c.src === undefined ? "" : ` <- ${c.src}`;
    const reduce = c.reduce === undefined ? "" : ` ${c.reduce}`;
    lines.push(`claim ${c.collective}${reduce} ${c.tensor}${src} axis ${c.axis} over r[${c.ranks.join(", ")}]`);
  }
  for (const rp of plan.ranks) {
    const local = rp.local.length === 0 ? "(none)" : rp.local.map(formatRegionText).join(", ");
    lines.push(`rank ${rp.rank}  local ${local}`);
    rp.streams.forEach((ops, s) => {
      if (ops.length === 0) lines.push(`r${rp.rank} s${s} (empty)`);
      ops.forEach((op, i) => {
        const after = op.deps.length === 0 ? "" : `  after ${op.deps.map(formatDependency).join(", ")}`;
        const signal = formatSignal(plan.signals?.notify[rp.rank]?.[s]?.[i]);
        const label = op.label === undefined ? "" : `  # ${op.label}`;
        lines.push(`r${rp.rank} s${s} #${i} ${describeOp(op)}${after}${signal}${label}`);
      });
    });
  }
  return `${lines.join("\n")}\n`;
}
