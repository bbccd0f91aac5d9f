// `--dtype`: the element type an `ovl emit <operator>` compiles for, one of the emitter's
// OPERATOR_DTYPES. Parsed as commander parses `--world`, so a bad value is refused before any
// work, with the values that are allowed; fp8e4m3 (fp8 A and B with per-tensor scales, a bf16
// output) only by the operators that take it (FP8_OPERATORS: ag-gemm).
import { InvalidArgumentError } from "commander";
import { FP8_OPERATORS, OPERATOR_DTYPES, isOperatorDtype, type OperatorDtype } from "@ovl/tlx-emitter";
import { closest } from "./suggest.js";

/** The element type when `--dtype` is not given. */
export const DEFAULT_DTYPE: OperatorDtype = "bf16";

/** What `--help` says of `--dtype` for `operator`: its values, and for an fp8 operator what fp8 means. */
export function dtypeHelp(operator: string): string {
  const values = dtypesOf(operator);
  const fp8 = values.includes("fp8e4m3")
    ? "; fp8e4m3: fp8 A and B with per-tensor float32 scales scale_a, scale_b, C = (A @ B) * scale_a * scale_b in bf16"
    : "";
  return `element type of the tensors: ${values.join(" | ")} (default ${DEFAULT_DTYPE}${fp8})`;
}

/** The element types `operator` takes: fp8e4m3 only where it is one of `FP8_OPERATORS`. */
export function dtypesOf(operator: string): readonly OperatorDtype[] {
  const fp8 = (FP8_OPERATORS as readonly string[]).includes(operator);
  return OPERATOR_DTYPES.filter((d) => fp8 || d !== "fp8e4m3");
}

/**
 * Parser of `--dtype`: one of `OPERATOR_DTYPES`, else the hint commander prints (exit 2). With
 * `operator`, fp8e4m3 is refused for an operator that does not take it, naming those that do.
 */
export function parseDtypeFlag(value: string, operator?: string): OperatorDtype {
  if (isOperatorDtype(value)) {
    if (operator !== undefined && !dtypesOf(operator).includes(value))
      throw new InvalidArgumentError(
        `${operator} does not take ${value}: fp8 operands (per-tensor scales, bf16 output) are taken by ${FP8_OPERATORS.join(", ")}; use one of: ${dtypesOf(operator).join(", ")}`,
      );
    return value;
  }
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
