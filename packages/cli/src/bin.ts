#!/usr/bin/env node
// The `ovl` binary: runs the command line on the process's arguments and exits with its status.
import { runCli } from "./cli.js";

// `ovl plan … | head` closes the pipe early; that is not an error of ovl.
process.stdout.on("error", (e: NodeJS.ErrnoException) => {
  if (e.code === "EPIPE") process.exit(0);
  throw e;
});

process.exitCode = await runCli(process.argv.slice(2));
