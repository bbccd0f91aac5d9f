// What every backend returns for an operator: the kernel sources and the manifest that
// launches them (the contract between compile(), the CLI and the runner).
import type { Manifest } from "./manifest/schema.js";

/** A file the emitter writes, relative to the manifest. */
export interface EmittedFile {
  readonly path: string;
  readonly text: string;
}

/** What an emitter returns: the kernel sources and the manifest that launches them. */
export interface EmitResult {
  readonly files: EmittedFile[];
  readonly manifest: Manifest;
  /**
   * Precompiled (TLX) kernels only: per kernel name, the PTX patterns its compiled code must
   * hold, for the AOT check (`expect.json` beside the manifest for scripts/tlx-aot-compile.py).
   */
  readonly expect?: Readonly<Record<string, readonly string[]>>;
}
