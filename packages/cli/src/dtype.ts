// `--dtype`: the element type an `ovl emit <operator>` compiles for, one of the emitter's
// OPERATOR_DTYPES. Parsed as commander parses `--world`, so a bad value is refused before any
// work, with the values that are allowed.
import { InvalidArgumentError } from "commander";
import { OPERATOR_DTYPES, isOperatorDtype, type OperatorDtype } from "@ovl/tlx-emitter";
import { closest } from "./suggest.js";

/** The element type when `--dtype` is not given. */
export const DEFAULT_DTYPE: OperatorDtype = "bf16";

/** Parser of `--dtype`: one of `OPERATOR_DTYPES`, else the hint commander prints (exit 2). */
export function parseDtypeFlag(value: string): OperatorDtype {
  if (isOperatorDtype(value)) return value;
  const near = closest(value, OPERATOR_DTYPES);
  throw new InvalidArgumentError(
    near === undefined
      ? `unknown dtype '${value}'; use one of: ${OPERATOR_DTYPES.join(", ")}`
      : `unknown dtype '${value}'; did you mean '${near}'? (one of: ${OPERATOR_DTYPES.join(", ")})`,
  );
}

/** What a name or a line says of `dtype`: nothing for the default, `_fp16` / `, fp16` otherwise. */
export function dtypeSuffix(dtype: OperatorDtype, separator: "_" | ", "): string {
  return dtype === DEFAULT_DTYPE ? "" : `${separator}${dtype}`;
}
