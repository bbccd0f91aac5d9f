// @ovl/cli README: the command line as a function (the simulator through `ovl simulate`) and the
// demo pipeline without emulation, which writes its kernels and manifest.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CliError, type Io, runCli, runDemo, UsageError } from "@ovl/cli";
import { holds, same } from "./check.js";

let out = "";
const io: Io = { out: (s) => void (out += s), err: () => {}, interactive: false };
const status = await runCli(["simulate", "ag-gemm", "--world", "4", "--json"], io);
same(status, 0, "ovl simulate exits 0");
holds(JSON.parse(out) !== null, "and prints JSON");

const dir = mkdtempSync(join(tmpdir(), "ovl-downstream-demo-"));
try {
  const { summary } = await runDemo({ world: 4, outDir: join(dir, "demo"), emulate: false, write: () => {} });
  holds(summary !== undefined, "runDemo returns a summary");
} finally {
  rmSync(dir, { recursive: true, force: true });
}
const usage = await runCli(["emit", "no-such-operator"], { ...io, out: () => {} });
same(usage, 2, "a usage error exits 2");
const error = new UsageError("unknown-operator", "x");
holds(error instanceof CliError && error.exitCode === 2, "UsageError is a CliError with exit code 2");
console.log("@ovl/cli: README example ok");
