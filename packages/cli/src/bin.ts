#!/usr/bin/env node
// The `ovl` binary. The command set (plan, validate, emit, simulate, tune, run, report,
// demo) lands with the CLI's issue; until then the binary says so and exits non-zero.
process.stderr.write("ovl: the command line is not available in this version yet; see the README for the demo.\n");
process.exit(2);
