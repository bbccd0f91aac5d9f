// Refusals of a user's local kernel: every one names the file and the 1-based line the
// problem is on, so the message reads like a compiler diagnostic (`kernel.py:17: ...`).
import { EmitError, type EmitErrorCode } from "../core/writer/errors.js";

/** Why a local kernel (or the tile program applied to it) was refused. */
export type LocalKernelErrorCode = Extract<
  EmitErrorCode,
  | "syntax-error"
  | "no-annotation"
  | "bad-annotation"
  | "unknown-parameter"
  | "unsafe-tile-loop"
  | "unsafe-load"
  | "unsafe-store"
  | "name-collision"
  | "bad-import"
  | "bad-signature"
  | "bad-program"
  | "bad-identifier"
>;

/** A local kernel the transformation refuses; `file` and `line` (1-based, 0 = none) locate it. */
export class LocalKernelError extends EmitError {
  declare readonly code: LocalKernelErrorCode;
  readonly file: string;
  readonly line: number;

  constructor(code: LocalKernelErrorCode, file: string, line: number, what: string) {
    super(code, line > 0 ? `${file}:${line}: ${what}` : `${file}: ${what}`);
    this.name = "LocalKernelError";
    this.file = file;
    this.line = line;
  }
}
