// The base of @ovl/chunk-plan's typed errors: every module's error class (PlanError,
// RegionError, SignalError, TileScheduleError, …, and @ovl/sim's SimulateError and TuneError
// and @ovl/frontends' FrontendError) carries a `code` a caller can switch on, and a message
// that says what to fix.

/** A typed error with a string `code`; `instanceof CodedError` catches any of the package's errors that carry one. */
export class CodedError<Code extends string = string> extends Error {
  readonly code: Code;

  constructor(code: Code, message: string) {
    super(message);
    this.code = code;
  }
}
