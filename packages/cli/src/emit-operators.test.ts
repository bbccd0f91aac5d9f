// `ovl emit <operator>`: the subcommands are the emitter's registry entries, each listing its
// own flags and the shared ones it takes, and nothing of another operator's.
import { OPERATOR_REGISTRY } from "@ovl/tlx-emitter";
import { describe, expect, it } from "vitest";
import { runCli } from "./cli.js";
import { EMITTERS } from "./commands/emit-operators.js";
import { ovl } from "./testing.js";

async function help(...args: string[]): Promise<string> {
  let out = "";
  const status = await runCli([...args, "--help"], { out: (t) => (out += t), err: () => undefined, interactive: false });
  expect(status).toBe(0);
  return out;
}

/** The long flags a help text lists. */
const flags = (text: string): string[] => [...text.matchAll(/^ {2}(--[a-z-]+)/gm)].map((m) => m[1]!);

describe("ovl emit <operator>", () => {
  it("has one subcommand per registry entry with options, each with an emission routine", async () => {
    const listed = await help("emit");
    const offered = OPERATOR_REGISTRY.filter((d) => d.cli !== undefined);
    expect(offered.length).toBe(9);
    for (const d of offered) {
      expect(listed).toMatch(new RegExp(`^ {2}${d.name} \\[options\\]`, "m"));
      expect(EMITTERS[d.name], d.name).toBeDefined();
    }
    expect(listed).not.toContain("ag-grouped-gemm");
  });

  it("lists only the operator's own flags and the shared ones it takes", async () => {
    const rs = flags(await help("emit", "gemm-rs"));
    expect(rs).toEqual(
      expect.arrayContaining(["--shape", "--m", "--world", "--target", "--tlx", "--comm-sms", "--kernel", "--plan", "--out"]),
    );
    for (const other of ["--seq", "--heads", "--experts", "--topk", "--tokens", "--causal"]) expect(rs).not.toContain(other);
    const attention = flags(await help("emit", "ag-attention"));
    expect(attention).toEqual(
      expect.arrayContaining(["--seq", "--heads", "--kv-heads", "--head-dim", "--causal", "--world", "--template"]),
    );
    for (const other of ["--tlx", "--shape", "--target", "--plan", "--experts", "--m"]) expect(attention).not.toContain(other);
    for (const d of OPERATOR_REGISTRY.filter((e) => e.cli !== undefined)) {
      const listed = flags(await help("emit", d.name));
      for (const o of d.cli!.options) expect(listed, d.name).toContain(`--${o.name}`);
      expect(listed.includes("--tlx"), d.name).toBe(d.cli!.shared.includes("tlx"));
    }
    expect(await help("emit", "gemm-rs")).toMatch(/plan template: direct, ring\s+\(default\s+direct\)/);
  });

  it("refuses another operator's flag and suggests the closest operator", async () => {
    const [foreign, typo] = await Promise.all([ovl(["emit", "gemm-rs", "--seq", "64"]), ovl(["emit", "gemm-sr", "--world", "2"])]);
    expect(foreign.status).toBe(2);
    expect(foreign.stderr).toContain("unknown option '--seq'");
    expect(typo.status).toBe(2);
    expect(typo.stderr).toContain("unknown command 'gemm-sr'");
    expect(typo.stderr).toMatch(/Did you mean .*gemm-rs/);
  });
});
