// Throughput of @ovl/mapping on the expressions real schedules produce: TileLink §4.1's
// AllGather maps (pull, push, swizzled), ring ReduceScatter and AllToAll maps over a sweep
// of shapes and world sizes (including 3, 5, 6, 7), simplified, evaluated and printed.
import {
  add,
  allGatherPull,
  allGatherPush,
  allToAll,
  ceilDiv,
  evaluate,
  floorDiv,
  freeVariables,
  min,
  mod,
  mul,
  reduceScatterRing,
  simplify,
  toPython,
  toTypeScript,
  variable,
  type Expr,
  type TileMapping,
} from "@ovl/mapping";
import { measure, type SuiteResult } from "../harness.js";

const SHAPES = [
  { rows: 8192, cols: 4096, tileRows: 128, tileCols: 256 },
  { rows: 4096, cols: 14336, tileRows: 256, tileCols: 128 },
  { rows: 1000, cols: 3584, tileRows: 64, tileCols: 512 },
  { rows: 16384, cols: 8192, tileRows: 128, tileCols: 128 },
];
const WORLDS = [2, 3, 4, 5, 6, 7, 8];

/** The AllGather pull formulas written out as TileLink §4.1 states them, before simplification. */
function rawAllGather(rows: number, world: number, tileRows: number, channels: number): Expr[] {
  const perRank = Math.ceil(rows / world);
  const tilesPerRank = Math.ceil(perRank / tileRows);
  const tile = variable("tile", { min: 0, max: world * tilesPerRank - 1 });
  const rank = variable("rank", { min: 0, max: world - 1 });
  const src = mod(add(rank, floorDiv(tile, tilesPerRank)), world); // swizzled: own shard first
  const local = mod(tile, tilesPerRank);
  const start = add(mul(src, perRank), mul(local, tileRows));
  return [
    min(start, rows),
    min(add(mul(src, perRank), min(add(mul(local, tileRows), tileRows), perRank)), rows),
    floorDiv(tile, Math.max(1, Math.floor(perRank / tileRows))),
    add(mul(src, channels), floorDiv(local, ceilDiv(tilesPerRank, channels))),
    mod(add(tile, rank, 1), world),
  ];
}

function mappingExprs(m: TileMapping): Expr[] {
  const out: Expr[] = [];
  for (const r of m.shape.ranges) for (const x of [r.start, r.end]) if (x.kind === "static") out.push(x.expr);
  if (m.rank.rank.kind === "static") out.push(m.rank.rank.expr);
  if (m.channel.channel.kind === "static") out.push(m.channel.channel.expr);
  return out;
}

export default function mappingSuite(): SuiteResult {
  const raw: Expr[] = [];
  const built: Expr[] = [];
  for (const s of SHAPES) {
    for (const worldSize of WORLDS) {
      for (const channelsPerRank of [1, 2, 4]) {
        raw.push(...rawAllGather(s.rows, worldSize, s.tileRows, channelsPerRank));
        const t = { ...s, worldSize, channelsPerRank };
        for (const m of [allGatherPull(t), allGatherPull(t, "swizzled"), allGatherPush(t), reduceScatterRing(t), allToAll(t)]) {
          built.push(...mappingExprs(m));
        }
      }
    }
  }
  const simplified = built.map(simplify);
  // Evaluation points: 16 tile ids spread over each expression's range, rank fixed.
  const points = simplified.map((e) => {
    const tile = findVar(e, "tile");
    const span = tile ? tile.max - tile.min : 0;
    return Array.from({ length: 16 }, (_, i) => ({ tile: (tile?.min ?? 0) + Math.floor((span * i) / 15), rank: 1 }));
  });
  const compiled = simplified.map((e) => {
    const names = freeVariables(e);
    const f = new Function(...names, `return (${toTypeScript(e)});`) as (...xs: number[]) => number;
    return (env: Record<string, number>) => f(...names.map((n) => env[n] as number));
  });
  const evaluations = points.reduce((n, p) => n + p.length, 0);
  let sink = 0;
  const measurements = [
    measure("simplify: raw TileLink AllGather formulas", () => raw.forEach((e) => simplify(e)), { itemsPerIteration: raw.length }),
    measure("simplify: built collective maps (canonical input)", () => built.forEach((e) => simplify(e)), {
      itemsPerIteration: built.length,
    }),
    measure(
      "evaluate: interpreted, 16 tiles per expression",
      () => {
        simplified.forEach((e, i) => points[i]!.forEach((env) => (sink += evaluate(e, env))));
      },
      { itemsPerIteration: evaluations },
    ),
    measure(
      "evaluate: toTypeScript + new Function (baseline)",
      () => {
        compiled.forEach((f, i) => points[i]!.forEach((env) => (sink += f(env))));
      },
      { itemsPerIteration: evaluations },
    ),
    measure("toPython (python dialect)", () => simplified.forEach((e) => toPython(e)), { itemsPerIteration: simplified.length }),
    measure("toPython (triton dialect)", () => simplified.forEach((e) => toPython(e, { dialect: "triton" })), {
      itemsPerIteration: simplified.length,
    }),
    measure("toTypeScript", () => simplified.forEach((e) => toTypeScript(e)), { itemsPerIteration: simplified.length }),
  ];
  if (Number.isNaN(sink)) throw new Error("unreachable: evaluation produced NaN");
  return {
    suite: "mapping",
    description: `@ovl/mapping on ${raw.length} raw TileLink AllGather formulas and ${built.length} expressions of built AllGather (pull, swizzled, push), ring ReduceScatter and AllToAll maps; ${SHAPES.length} shapes × world sizes ${WORLDS.join(", ")} × 1/2/4 channels per rank.`,
    measurements,
  };
}

function findVar(e: Expr, name: string): { min: number; max: number } | undefined {
  if (e.op === "var") return e.name === name ? e.range : undefined;
  if (e.op === "const") return undefined;
  const kids = "args" in e ? e.args : [e.dividend, e.divisor];
  for (const k of kids) {
    const r = findVar(k, name);
    if (r) return r;
  }
  return undefined;
}
