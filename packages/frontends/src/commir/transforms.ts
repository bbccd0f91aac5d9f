// The schedule primitives of Mercury Table 2 as pure functions Program → Program.
// Computation primitives (tile, join, reorder, patch) rewrite the loop nest; communication
// primitives (parallelize, shift, shard, replicate) annotate loops and buffers (§7.2).
import { FrontendError } from "../errors.js";
import { add, div, mod, mul, substitute, v } from "./expr.js";
import { bufferOf, dimExtent, dimVars, loopOf, type Loop, type Program, type ShardAnnotation } from "./ir.js";

function fail(what: string, why: string): never {
  throw new FrontendError("invalid-transform", `${what}: ${why}`);
}

function rebind(p: Program, name: string, by: ReturnType<typeof v>): Program["bindings"] {
  return Object.fromEntries(Object.entries(p.bindings).map(([a, e]) => [a, substitute(e, name, by)]));
}

function freshName(p: Program, name: string): string {
  if (p.loops.some((l) => l.name === name)) fail("naming", `loop ${name} already exists; pass other names`);
  return name;
}

/**
 * `Tile(J)`: splits loop `name` (extent E) into an outer loop `names[0]` (E / factor) and an
 * inner loop `names[1]` (factor): `j = j0 · factor + j1`. `factor` must divide E.
 */
export function tile(p: Program, name: string, factor: number, names: readonly [string, string] = [`${name}0`, `${name}1`]): Program {
  const { loop, index } = loopOf(p, name);
  if (loop.parallel || loop.shift) fail(`tile(${name})`, "tile a loop before parallelizing or shifting it");
  if (p.patch && index >= loopOf(p, p.patch.from).index) fail(`tile(${name})`, "the loop is inside a patch; tile before patching");
  if (!Number.isSafeInteger(factor) || factor < 1 || loop.extent % factor !== 0)
    fail(`tile(${name}, ${factor})`, `the factor must divide the extent ${loop.extent}`);
  const outer: Loop = { name: freshName(p, names[0]), extent: loop.extent / factor, kind: loop.kind, origin: loop.origin };
  const inner: Loop = {
    name: names[1] === names[0] ? fail("tile", "the two loops need different names") : freshName(p, names[1]),
    extent: factor,
    kind: loop.kind,
    origin: loop.origin,
  };
  const loops = [...p.loops.slice(0, index), outer, inner, ...p.loops.slice(index + 1)];
  return { ...p, loops, bindings: rebind(p, name, add(mul(v(outer.name), factor), v(inner.name))) };
}

/** `Join(I, J)`: merges adjacent loops `outer`, `inner` (same kind) into one: `i = ij div |J|`, `j = ij mod |J|`. */
export function join(p: Program, outer: string, inner: string, name = `${outer}${inner}`): Program {
  const a = loopOf(p, outer);
  const b = loopOf(p, inner);
  if (b.index !== a.index + 1) fail(`join(${outer}, ${inner})`, "the loops must be adjacent, outer first; reorder them first");
  for (const l of [a.loop, b.loop]) if (l.parallel || l.shift) fail(`join(${outer}, ${inner})`, `loop ${l.name} is parallel or shifted`);
  if (p.patch && b.index >= loopOf(p, p.patch.from).index)
    fail(`join(${outer}, ${inner})`, "the loops are inside a patch; join before patching");
  if (a.loop.kind !== b.loop.kind) fail(`join(${outer}, ${inner})`, "a spatial and a reduction loop cannot merge");
  const merged: Loop = {
    name: freshName(p, name),
    extent: a.loop.extent * b.loop.extent,
    kind: a.loop.kind,
    origin: [...a.loop.origin, ...b.loop.origin],
  };
  const bindings = rebind(
    { ...p, bindings: rebind(p, outer, div(v(merged.name), b.loop.extent)) },
    inner,
    mod(v(merged.name), b.loop.extent),
  );
  const loops = [...p.loops.slice(0, a.index), merged, ...p.loops.slice(b.index + 1)];
  return { ...p, loops, bindings };
}

/** `Reorder`: the loop nest in the given order (a permutation of the loop names). */
export function reorder(p: Program, order: readonly string[]): Program {
  const loops = order.map((n) => loopOf(p, n).loop);
  if (new Set(order).size !== p.loops.length || order.length !== p.loops.length)
    fail("reorder", `give every loop exactly once: ${p.loops.map((l) => l.name).join(", ")}`);
  if (p.patch) {
    const inside = new Set(p.loops.slice(loopOf(p, p.patch.from).index).map((l) => l.name));
    const tail = loops.slice(loops.length - inside.size);
    if (!tail.every((l) => inside.has(l.name))) fail("reorder", "loops inside a patch must stay innermost");
    return { ...p, loops, patch: { ...p.patch, from: tail[0]!.name } };
  }
  return { ...p, loops };
}

/** `Patch(op)`: loops from `from` inward become one opaque call of `kernel` (e.g. "flash_attention"). */
export function patch(p: Program, from: string, kernel: string): Program {
  const { index } = loopOf(p, from);
  for (const l of p.loops.slice(index))
    if (l.parallel || l.shift) fail(`patch(${from})`, `loop ${l.name} inside the patch is parallel or shifted`);
  return { ...p, patch: { from, kernel } };
}

/**
 * `Parallelize(I, level)`: runs loop `name`'s iterations on the ranks of mesh level
 * `level` (its extent must equal that level's size, checked at lowering). Default
 * placement (Mercury §4.2): buffers indexed by the loop are sharded along that dim,
 * the others replicated (as is a dim shorter than the loop, e.g. GQA's KV heads).
 */
export function parallelize(p: Program, name: string, level: number): Program {
  const { loop, index } = loopOf(p, name);
  if (loop.parallel) fail(`parallelize(${name})`, "the loop is already parallel");
  if (p.loops.some((l) => l.parallel?.level === level))
    fail(`parallelize(${name}, ${level})`, `mesh level ${level} already has a parallel loop`);
  if (!Number.isSafeInteger(level) || level < 0) fail(`parallelize(${name}, ${level})`, "the mesh level must be an integer >= 0");
  if (p.patch && index >= loopOf(p, p.patch.from).index) fail(`parallelize(${name})`, "the loop is inside a patch");
  const loops = p.loops.map((l, i) => (i === index ? { ...l, parallel: { level } } : l));
  const shards = Object.fromEntries(
    p.buffers.map((b) => {
      // A dim with fewer entries than ranks (GQA's KV heads) stays replicated: ranks share entries.
      const dim = b.dims.findIndex((d) => dimVars(p, d).has(name) && dimExtent(p, d) >= loop.extent);
      const own = p.shards[b.name] ?? [];
      return [b.name, dim < 0 ? own : [...own, { loop: name, dim }]];
    }),
  );
  return { ...p, loops, shards };
}

/**
 * `Shift(J, I)`: offsets local loop `name` by parallel loop `by`, `j → (j + i) mod |J|`, so
 * ranks visit the blocks of J in staggered order. Extents must match. Read buffers indexed
 * by J (and not by I) are sharded along that dim over I (Mercury §4.2: "we automatically
 * shard buffers associated with shifted loops").
 */
export function shift(p: Program, name: string, by: string): Program {
  const { loop, index } = loopOf(p, name);
  const par = loopOf(p, by).loop;
  if (loop.parallel) fail(`shift(${name}, ${by})`, `${name} is parallel; shift a local loop`);
  if (!par.parallel) fail(`shift(${name}, ${by})`, `${by} is not parallel; parallelize it first`);
  if (loop.shift) fail(`shift(${name}, ${by})`, `${name} is already shifted`);
  if (loop.extent !== par.extent)
    fail(`shift(${name}, ${by})`, `extents differ (${loop.extent} vs ${par.extent}); tile ${name} by ${par.extent} first`);
  if (p.patch && index >= loopOf(p, p.patch.from).index) fail(`shift(${name})`, "the loop is inside a patch");
  const loops = p.loops.map((l, i) => (i === index ? { ...l, shift: { by } } : l));
  const next: Program = { ...p, loops, bindings: rebind(p, name, mod(add(v(name), v(by)), loop.extent)) };
  let out = next;
  for (const input of p.inputs) {
    const b = bufferOf(p, input);
    const dim = b.dims.findIndex((d) => dimVars(p, d).has(name));
    if (dim >= 0 && !b.dims.some((d) => dimVars(p, d).has(by))) out = shard(out, input, by, dim);
  }
  return out;
}

/**
 * `Shard(B, I)`: cuts buffer `buffer` along `dim` among the ranks of parallel loop `loop`.
 * Default dim: the one indexed by a loop shifted by `loop`, else by `loop` itself, else the
 * first whose extent the loop divides (a buffer "can be sharded even on a loop that is not
 * in its access index").
 */
export function shard(p: Program, buffer: string, loop: string, dim?: number): Program {
  const b = bufferOf(p, buffer);
  const par = loopOf(p, loop).loop;
  if (!par.parallel) fail(`shard(${buffer}, ${loop})`, `${loop} is not parallel; parallelize it first`);
  const shifted = p.loops.filter((l) => l.shift?.by === loop).map((l) => l.name);
  const pick =
    dim ??
    [
      b.dims.findIndex((d) => shifted.some((s) => dimVars(p, d).has(s))),
      b.dims.findIndex((d) => dimVars(p, d).has(loop)),
      b.dims.findIndex((d) => dimExtent(p, d) % par.extent === 0),
    ].find((x) => x >= 0);
  if (pick === undefined || pick < 0 || pick >= b.dims.length)
    fail(`shard(${buffer}, ${loop})`, "no dimension of the buffer can be cut by this loop; pass dim");
  if (dimExtent(p, b.dims[pick]!) < par.extent)
    fail(`shard(${buffer}, ${loop})`, `dimension ${pick} is smaller than the ${par.extent} ranks`);
  const own: ShardAnnotation[] = (p.shards[buffer] ?? []).filter((s) => s.loop !== loop);
  return { ...p, shards: { ...p.shards, [buffer]: [...own, { loop, dim: pick }] } };
}

/** `Replicate(B, I)`: every rank of parallel loop `loop` holds a full copy of `buffer` (drops its shard on `loop`). */
export function replicate(p: Program, buffer: string, loop: string): Program {
  bufferOf(p, buffer);
  if (!loopOf(p, loop).loop.parallel) fail(`replicate(${buffer}, ${loop})`, `${loop} is not parallel`);
  return { ...p, shards: { ...p.shards, [buffer]: (p.shards[buffer] ?? []).filter((s) => s.loop !== loop) } };
}
