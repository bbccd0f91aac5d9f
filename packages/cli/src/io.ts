// Where the CLI writes: results to stdout (text for people, or one JSON document with
// `--json`), progress and diagnostics to stderr, so `ovl … --json | jq` always parses.

/** The two output streams, injectable for tests and library use. */
export interface Io {
  /** Results (stdout). */
  readonly out: (text: string) => void;
  /** Progress and diagnostics (stderr). */
  readonly err: (text: string) => void;
  /** Whether stderr is a terminal (progress bars redraw in place only there). */
  readonly interactive: boolean;
}

/** The process's own streams. */
export const processIo: Io = {
  out: (t) => void process.stdout.write(t),
  err: (t) => void process.stderr.write(t),
  interactive: process.stderr.isTTY === true,
};

/** What a command produced: a JSON value for `--json`, and lines for people. */
export interface CommandOutput {
  readonly json: unknown;
  readonly lines: readonly string[];
}

/** Print a command's output as JSON (`--json`) or as text. */
export function printOutput(io: Io, output: CommandOutput, json: boolean): void {
  if (json) io.out(`${JSON.stringify(output.json, null, 2)}\n`);
  else if (output.lines.length > 0) io.out(`${output.lines.join("\n")}\n`);
}

/**
 * A progress bar on stderr: redrawn in place on a terminal, otherwise one line per tenth
 * of the work, so logs of long searches stay short.
 */
export class ProgressBar {
  private lastTenth = -1;
  private drawn = false;

  constructor(
    private readonly io: Io,
    private readonly label: string,
    private readonly width = 30,
  ) {}

  /** Show `done` of `total` (and an optional note, e.g. the current candidate). */
  update(done: number, total: number, note = ""): void {
    const frac = total > 0 ? Math.min(1, done / total) : 1;
    if (this.io.interactive) {
      const filled = Math.round(frac * this.width);
      const bar = "█".repeat(filled) + "░".repeat(this.width - filled);
      this.io.err(`\r${this.label} ${bar} ${done}/${total}${note ? ` ${note}` : ""}\x1b[K`);
      this.drawn = true;
      return;
    }
    const tenth = Math.floor(frac * 10);
    if (tenth !== this.lastTenth) {
      this.lastTenth = tenth;
      this.io.err(`${this.label} ${Math.round(frac * 100)}% (${done}/${total})${note ? ` ${note}` : ""}\n`);
    }
  }

  /** End the bar's line. */
  finish(): void {
    if (this.drawn) this.io.err("\n");
    this.drawn = false;
  }
}
