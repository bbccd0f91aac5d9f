// Shrinks a compute benchmark directory (emit-compute.ts bench + emit-tlx-compute.ts) to what
// table-check.ts reads: per shape the tuned Triton kernel, its plain body and the one TLX backend
// kernel of the table entry's `tlx` configuration (matched as table-check.ts matches it); every
// other case and its files under emitted/ and tlx/ go. A payload of every TLX variant at every
// shape is too large to carry to a GPU machine; the picks alone are not.
//   tsx scripts/compute-tables/table-picks.ts <bench-dir> <target>
import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { TargetName } from "@ovl/primitives";
import { type ComputeConfigTable, computeConfigs } from "@ovl/tlx-emitter";
import type { ComputeBenchFile, ComputeCase } from "./emit-compute.js";
import { entryOf, isEntryTlx } from "./table-check.js";

/** Roles of a bench file's cases that table-check.ts reads besides the TLX pick. */
const TUNED_ROLES: readonly string[] = ["tuned", "tuned-plain"];

/**
 * `bench` with, per shape, only its tuned cases and the TLX kernel of its table entry.
 * @throws {Error} when an entry names a TLX configuration the shape holds no case of.
 */
export function tablePicks(table: ComputeConfigTable, bench: ComputeBenchFile): ComputeBenchFile {
  const shapes = bench.shapes.map((s) => {
    const t = entryOf(table, s)?.tlx;
    const cases = s.cases.filter((c) => TUNED_ROLES.includes(c.role ?? "") || (t !== undefined && isEntryTlx(c, t)));
    if (t !== undefined && !cases.some((c) => c.role === "tlx-emitted"))
      throw new Error(`${s.name}: no case of the ${table.target} table's TLX configuration ${JSON.stringify(t)}`);
    return { ...s, cases };
  });
  return { ...bench, shapes };
}

/** The paths under a bench directory that `cases` need: a precompiled case its folder, another its file. */
function needed(cases: readonly ComputeCase[]): Set<string> {
  return new Set(cases.map((c) => (c.cubin === undefined ? c.file : dirname(c.file))));
}

function main(argv: readonly string[]): void {
  const [dir, target] = argv;
  if (dir === undefined || target === undefined) {
    console.error("usage: tsx scripts/compute-tables/table-picks.ts <bench-dir> <target>");
    process.exit(2);
  }
  const table = computeConfigs(target as TargetName);
  if (table === null) throw new Error(`no tuned table for ${target}`);
  const bench = JSON.parse(readFileSync(join(dir, "compute.json"), "utf8")) as ComputeBenchFile;
  const picked = tablePicks(table, bench);
  const keep = needed(picked.shapes.flatMap((s) => s.cases));
  let removed = 0;
  for (const sub of ["emitted", "tlx"]) {
    let names: string[];
    try {
      names = readdirSync(join(dir, sub));
    } catch {
      continue;
    }
    for (const n of names) {
      if (keep.has(`${sub}/${n}`)) continue;
      rmSync(join(dir, sub, n), { recursive: true });
      removed += 1;
    }
  }
  writeFileSync(join(dir, "compute.json"), `${JSON.stringify(picked, null, 1)}\n`);
  const kept = picked.shapes.reduce((a, s) => a + s.cases.length, 0);
  console.log(`${dir}: ${kept} cases kept over ${picked.shapes.length} shapes, ${removed} files or folders removed`);
}

if (process.argv[1]?.endsWith("table-picks.ts")) main(process.argv.slice(2));
