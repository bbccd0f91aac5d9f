// Vitest setup shared by every package: when FC_SEED is set (CI sets it), fast-check runs
// every property with that seed, so a CI run is reproducible; locally each run explores
// new random cases. A property test that fixes its own seed keeps it.
import fc from "fast-check";

const seed = process.env.FC_SEED;
if (seed !== undefined && seed !== "") {
  const n = Number(seed);
  if (!Number.isSafeInteger(n)) throw new Error(`FC_SEED must be an integer, got ${seed}`);
  fc.configureGlobal({ ...fc.readConfigureGlobal(), seed: n });
}
