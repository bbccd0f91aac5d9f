// A manifest as JSON text with a stable key order: `$schema` first, then every object's
// keys sorted, so the same manifest always prints the same bytes (diffable, cacheable).
import type { Manifest } from "./schema.js";
import { validated } from "./validate.js";

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a === "$schema" ? -1 : b === "$schema" ? 1 : a < b ? -1 : a > b ? 1 : 0));
    return Object.fromEntries(entries.map(([k, v]) => [k, sortKeys(v)]));
  }
  return value;
}

/**
 * The manifest as JSON (2-space indent, trailing newline), validated against
 * `ovl.manifest/v1` first; keys sorted with `$schema` first.
 * @throws {EmitError} `bad-manifest` when the manifest does not validate.
 */
export function emitManifestJson(manifest: Manifest): string {
  return `${JSON.stringify(sortKeys(validated(manifest)), null, 2)}\n`;
}
