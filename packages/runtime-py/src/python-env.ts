// The runner's Python environment, made by the project itself: on first use a virtual
// environment next to the runner's sources with what the CPU emulation needs (numpy, and
// jsonschema, which checks every manifest; torch and triton too when the interpreter engine
// is asked for), reused afterwards.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { execa } from "execa";
import { RunnerError } from "./errors.js";

const PACKAGE_ROOT = fileURLToPath(new URL("..", import.meta.url));

/** Options of {@link ensurePythonEnv}. */
export interface PythonEnvOptions {
  /** Interpreter that creates the environment (default `python3`, ≥ 3.10). */
  readonly basePython?: string;
  /** Where the environment lives (default: `.venv` beside the runner's `pyproject.toml`). */
  readonly dir?: string;
  /** Also install torch and triton, for the interpreter engine (~3 GB, about a minute). */
  readonly interpret?: boolean;
  /** Called with one line per step (creating, installing), so a long first run is visible. */
  readonly onStep?: (line: string) => void;
}

function lastLines(text: string): string {
  return text.trim().split("\n").slice(-3).join(" ");
}

async function imports(python: string, modules: readonly string[]): Promise<boolean> {
  const r = await execa(python, ["-c", modules.map((m) => `import ${m}`).join("; ")], { reject: false, timeout: 60_000 });
  return r.exitCode === 0;
}

/**
 * The Python interpreter of the runner's environment, created when missing: a venv with
 * numpy and jsonschema (and, with `interpret`, the runner's `interpret` extra: torch and
 * triton). An environment that already imports them is reused untouched; one that lacks
 * one is completed.
 * @throws {RunnerError} `python-missing` when no base interpreter can create it,
 *   `install-failed` with pip's last lines when an install fails.
 */
export async function ensurePythonEnv(options: PythonEnvOptions = {}): Promise<string> {
  const dir = options.dir ?? join(PACKAGE_ROOT, ".venv");
  const python = join(dir, "bin", "python");
  const needs = options.interpret === true ? ["numpy", "jsonschema", "torch", "triton"] : ["numpy", "jsonschema"];
  const say = options.onStep ?? (() => undefined);
  if (existsSync(python) && (await imports(python, needs))) return python;
  const base = options.basePython ?? "python3";
  if (!existsSync(python)) {
    say(`creating the runner's Python environment in ${dir}`);
    const made = await execa(base, ["-m", "venv", dir], { reject: false });
    if (made.exitCode !== 0) {
      throw new RunnerError(
        "python-missing",
        `could not create a virtual environment with ${base}: ${lastLines(String(made.stderr ?? "") || String(made.message))}`,
      );
    }
  }
  const pyproject = join(PACKAGE_ROOT, "pyproject.toml");
  // In the repository the runner is installed from its sources; from npm only its dependencies are.
  const target = existsSync(pyproject)
    ? [`${PACKAGE_ROOT}${options.interpret === true ? "[interpret]" : ""}`]
    : options.interpret === true
      ? ["numpy", "jsonschema>=4.18", "torch==2.11.0", "triton==3.6.0"]
      : ["numpy", "jsonschema>=4.18"];
  say(`installing ${options.interpret === true ? "numpy, jsonschema, torch and triton" : "numpy and jsonschema"} into it (pip)`);
  const pip = await execa(python, ["-m", "pip", "install", "--quiet", "--disable-pip-version-check", ...target], { reject: false });
  if (pip.exitCode !== 0) {
    throw new RunnerError(
      "install-failed",
      `pip could not install the runner's dependencies: ${lastLines(String(pip.stderr ?? "") || String(pip.message))}`,
    );
  }
  return python;
}
