// The dependency graph of a plan as a Mermaid flowchart: one subgraph per rank, a node per
// op (and per awaited compute event), solid edges for stream order, dashed edges for
// dependencies. Labels are escaped so any tensor name or op label renders safely.
import type { ChunkPlan } from "../model/schema.js";
import { describeOp, formatRegionText } from "./dump.js";

// Characters Mermaid may read as syntax inside a quoted label (quotes, entity and HTML
// markers, brackets of shapes) become numeric entity codes (`#60;` for `<`).
const SAFE = /^[A-Za-z0-9 .,:+\-_/=*[\]()]$/;

/** `text` as a quoted Mermaid label: every character outside a safe set as `#code;`. */
export function mermaidLabel(text: string): string {
  let out = "";
  for (const ch of text) out += SAFE.test(ch) ? ch : `#${ch.codePointAt(0)};`;
  return `"${out}"`;
}

/**
 * A Mermaid `flowchart TB` of `plan`: `subgraph rank<r>` per rank holding node
 * `r<r>_s<s>_<i>` per op (label: stream, index and {@link describeOp}) and a rounded node per
 * distinct compute event awaited on that rank; `a --> b` where b follows a in a stream,
 * `a -.-> b` where b depends on a.
 */
export function planToMermaid(plan: ChunkPlan): string {
  const lines: string[] = ["flowchart TB"];
  const edges: string[] = [];
  const id = (r: number, s: number, i: number): string => `r${r}_s${s}_${i}`;
  const computeIds = new Map<string, string>();
  const computeNodes: string[][] = plan.ranks.map(() => []);
  const computeNode = (rank: number, text: string): string => {
    const key = `${rank} ${text}`;
    let node = computeIds.get(key);
    if (node === undefined) {
      node = `c${rank}_${computeNodes[rank]?.length ?? 0}`;
      computeIds.set(key, node);
      computeNodes[rank]?.push(`    ${node}([${mermaidLabel(`compute ${text}`)}])`);
    }
    return node;
  };
  plan.ranks.forEach((rp) => {
    rp.streams.forEach((ops, s) =>
      ops.forEach((op, i) => {
        const me = id(rp.rank, s, i);
        if (i > 0) edges.push(`  ${id(rp.rank, s, i - 1)} --> ${me}`);
        for (const dep of op.deps) {
          const from =
            dep.kind === "op" ? id(dep.rank, dep.stream, dep.index) : computeNode(dep.rank, `r${dep.rank} ${formatRegionText(dep.region)}`);
          edges.push(`  ${from} -.-> ${me}`);
        }
      }),
    );
  });
  plan.ranks.forEach((rp) => {
    lines.push(`  subgraph rank${rp.rank} [${mermaidLabel(`rank ${rp.rank}`)}]`);
    rp.streams.forEach((ops, s) =>
      ops.forEach((op, i) => {
        const text = `s${s} #${i} ${describeOp(op)}${op.label === undefined ? "" : ` (${op.label})`}`;
        lines.push(`    ${id(rp.rank, s, i)}[${mermaidLabel(text)}]`);
      }),
    );
    lines.push(...(computeNodes[rp.rank] ?? []));
    lines.push("  end");
  });
  lines.push(...edges);
  return `${lines.join("\n")}\n`;
}
