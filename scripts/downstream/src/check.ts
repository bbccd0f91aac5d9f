// Small assertions for the README examples: a downstream project has no test runner, and an
// example that computes the wrong thing must fail the check, not only one that throws.
import { deepStrictEqual, ok } from "node:assert/strict";

export function same<T>(actual: T, expected: T, what: string): void {
  deepStrictEqual(actual, expected, what);
}

export function holds(condition: unknown, what: string): asserts condition {
  ok(condition, what);
}
