// Barrel of the writer: the Python writer, its identifier and literal rules, EmitError.
export { EmitError, type EmitErrorCode } from "./errors.js";
export { PYTHON_KEYWORDS, RESERVED_NAMES, checkIdentifier, isSafeIdentifier } from "./identifiers.js";
export { pyLiteral, pyName, pyString, sanitizeText, type PyScalar } from "./literals.js";
export { PythonWriter } from "./python-writer.js";
