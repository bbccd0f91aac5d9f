// The tuning cache: results keyed by (operator, shape, world, device), as a plain JSON
// document (`ovl.tune-cache/v1`) a caller keeps in a file. Pure: lookups and stores
// return values, the caller reads and writes the file.
import { z } from "zod";
import { TuneError } from "./errors.js";
import type { TuneProblem } from "./space.js";

/** Version tag of the cache format. */
export const TUNE_CACHE_SCHEMA = "ovl.tune-cache/v1" as const;

const Tile = z.object({ BM: z.number().int().positive(), BN: z.number().int().positive(), BK: z.number().int().positive() });

/** A candidate as stored. */
export const StoredCandidate = z.discriminatedUnion("path", [
  z.object({
    path: z.literal("overlapped"),
    split: z.number().int().positive(),
    backend: z.enum(["copy-engine", "sm"]),
    commSms: z.number().int().nonnegative(),
    tile: Tile,
    groupSizeM: z.number().int().positive(),
    allReduce: z.enum(["partitioned", "tilewise"]).optional(),
    plan: z
      .enum(["flat", "intra-node-first/staged", "intra-node-first/pipelined", "inter-node-first/staged", "inter-node-first/pipelined"])
      .optional(),
  }),
  z.object({ path: z.literal("sequential") }),
]);

/** A cached tuning result: the winner and how it was chosen. */
export const TuneCacheEntry = z.object({
  operator: z.enum(["ag-gemm", "gemm-rs", "gemm-ar"]),
  M: z.number().int().positive(),
  N: z.number().int().positive(),
  K: z.number().int().positive(),
  world: z.number().int().positive(),
  device: z.string().min(1),
  winner: StoredCandidate,
  /** The model's prediction for the winner, ms. */
  predictedMs: z.number().nonnegative(),
  /** The measured time of the winner, ms (absent when nothing was measured). */
  measuredMs: z.number().nonnegative().optional(),
  decision: z.enum(["overlapped", "sequential"]),
  message: z.string(),
  /** When the result was stored (ISO 8601). */
  at: z.string(),
});
export type TuneCacheEntry = z.infer<typeof TuneCacheEntry>;

/** The cache document. */
export const TuneCache = z.object({
  $schema: z.literal(TUNE_CACHE_SCHEMA),
  entries: z.record(z.string(), TuneCacheEntry),
});
export type TuneCache = z.infer<typeof TuneCache>;

/** An empty cache. */
export function emptyTuneCache(): TuneCache {
  return { $schema: TUNE_CACHE_SCHEMA, entries: {} };
}

/** The cache key of a problem on a device, e.g. `ag-gemm M=8192 N=1376 K=4096 bf16 world=8 H200_SXM`. */
export function tuneCacheKey(problem: TuneProblem, device: string): string {
  return `${problem.operator} M=${problem.M} N=${problem.N} K=${problem.K} ${problem.dtype} world=${problem.world} ${device}`;
}

/** The cached entry for `key`, if any. */
export function lookupTune(cache: TuneCache, key: string): TuneCacheEntry | undefined {
  return Object.hasOwn(cache.entries, key) ? cache.entries[key] : undefined;
}

/** A new cache with `entry` stored under `key` (replacing an older one). */
export function storeTune(cache: TuneCache, key: string, entry: TuneCacheEntry): TuneCache {
  return { $schema: TUNE_CACHE_SCHEMA, entries: { ...cache.entries, [key]: entry } };
}

/** Parse a cache document; `bad-cache` names the first bad field. */
export function parseTuneCache(text: string): TuneCache {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new TuneError("bad-cache", `the tuning cache is not JSON (${(e as Error).message}); delete the file to start a new one`);
  }
  const parsed = TuneCache.safeParse(json);
  if (!parsed.success) {
    const i = parsed.error.issues[0];
    throw new TuneError(
      "bad-cache",
      `the tuning cache is not ${TUNE_CACHE_SCHEMA}: ${i?.path.join(".") ?? ""}: ${i?.message ?? "invalid"}; delete the file to start a new one`,
    );
  }
  // A record parse assigns keys one by one, and an own key "__proto__" would be lost (it
  // sets the prototype instead): rebuild the entries with defined properties.
  const raw = (json as { entries: Record<string, unknown> }).entries;
  const entries = Object.fromEntries(Object.keys(raw).map((k) => [k, TuneCacheEntry.parse(raw[k])]));
  return { $schema: parsed.data.$schema, entries };
}

/** The cache as JSON text, keys in insertion order, 2-space indent. */
export function serializeTuneCache(cache: TuneCache): string {
  return `${JSON.stringify(cache, null, 2)}\n`;
}
