import { EmitError } from "../core/writer/index.js";

/** The `EmitError` code `f` throws (another error as its text), or undefined when it returns. */
export function codeOf(f: () => unknown): string | undefined {
  try {
    f();
  } catch (e) {
    return e instanceof EmitError ? e.code : String(e);
  }
  return undefined;
}
