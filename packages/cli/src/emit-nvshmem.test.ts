// `--backend nvshmem`: ag-gemm, gemm-rs and the partitioned gemm-ar emit nvshmem-push kernels (the same plan,
// NVSHMEM puts with signal), every other operator, the tile-wise gemm-ar and the simulator refuse it by name.
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Manifest } from "@ovl/tlx-emitter";
import { describe, expect, it } from "vitest";
import { runCli } from "./cli.js";

const temp = () => mkdtempSync(join(tmpdir(), "ovl-nvshmem-"));

async function run(args: string[]): Promise<{ status: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const status = await runCli(args, { out: (t) => (out += t), err: (t) => (err += t), interactive: false });
  return { status, out, err };
}

const small = ["--m", "512", "--n", "256", "--k", "128", "--world", "2", "--tile", "128x128x64"];

describe("ovl emit --backend nvshmem", () => {
  it("emits AG+GEMM and GEMM+RS with an nvshmem-push kernel and no host copies", async () => {
    for (const op of ["ag-gemm", "gemm-rs"]) {
      const dir = temp();
      const r = await run(["emit", op, ...small, "--backend", "nvshmem", "--comm-sms", "4", "--out", dir]);
      expect(r.status, r.err).toBe(0);
      expect(r.out).toContain("kernel nvshmem_push (nvshmem-push) on the comm stream");
      const m = Manifest.parse(JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")));
      expect(m.name).toBe(`${op.replace("-", "_")}_m512n256k128_w2_nvshmem_s2`);
      expect(m.hostOps).toEqual([]);
      const push = m.kernels.find((k) => k.name === "nvshmem_push")!;
      expect(push.requires).toEqual(["nvshmem"]);
      expect(push.grid).toEqual([{ kind: "num-sms", cap: Math.min(4, (m.tables.at(-1)!.values[0]!.length / 7) | 0) }]);
      expect(readFileSync(join(dir, "nvshmem_push.py"), "utf8")).toContain("put_signal_add(");
    }
  });

  it("emits the partitioned GEMM+AllReduce: the slab pushes and the reduced slabs' puts, no peer pointers, no host ops", async () => {
    for (const world of ["2", "4"]) {
      const dir = temp();
      const args = ["--m", "1024", "--n", "512", "--k", "512", "--world", world, "--backend", "nvshmem", "--out", dir];
      const r = await run(["emit", "gemm-ar", ...args]);
      expect(r.status, r.err).toBe(0);
      const m = Manifest.parse(JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")));
      expect(m.name).toBe(`gemm_ar_m1024n512k512_w${world}_nvshmem_s2`);
      expect(m.hostOps).toEqual([]);
      expect(m.kernels.map((k) => `${k.name}:${k.template.kind}:${k.stream}`)).toEqual([
        `gemm_ar_m1024n512k512_w${world}_nvshmem_s2_producer:local-producer:compute`,
        "nvshmem_push:nvshmem-push:comm",
        "nvshmem_push_ar:nvshmem-push:comm",
        "ar_reduce:ar-reduce:compute",
        "ar_done:slot-wait:compute",
      ]);
      expect(m.kernels.filter((k) => k.requires?.includes("nvshmem")).map((k) => k.name)).toEqual(["nvshmem_push", "nvshmem_push_ar"]);
      expect(m.kernels.flatMap((k) => k.args).filter((a) => a.value.kind === "peer-pointers")).toEqual([]);
      for (const f of ["nvshmem_push.py", "nvshmem_push_ar.py", "ar_reduce.py", "ar_done.py"])
        expect(readFileSync(join(dir, f), "utf8")).toContain("@triton.jit");
    }
  });

  it("emits the hierarchical AllGather+GEMM on 2 nodes x 2 GPUs: rail puts across nodes, relays inside them", async () => {
    const dir = temp();
    const args = ["--m", "512", "--n", "256", "--k", "128", "--mesh", "2x2", "--tile", "64x128x64", "--template", "hierarchical"];
    const r = await run(["emit", "ag-gemm", ...args, "--backend", "nvshmem", "--comm-sms", "2", "--out", dir]);
    expect(r.status, r.err).toBe(0);
    const m = Manifest.parse(JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")));
    expect(m.world).toBe(4);
    expect(m.hostOps).toEqual([]);
    const table = m.tables.find((t) => t.name === "push_segments")!;
    const shard = (512 / 4) * 128;
    table.values.forEach((flat, rank) => {
      const rows = Array.from({ length: flat.length / 7 }, (_, i) => flat.slice(7 * i, 7 * i + 7)).filter((x) => x[6]! >= 0);
      // Across nodes only this rank's own shard, to the same GPU of the other node (split 2: two puts).
      const network = rows.filter((x) => Math.floor(x[1]! / 2) !== Math.floor(rank / 2));
      expect(network.map((x) => [x[1], Math.floor(x[0]! / shard), x[4]])).toEqual([
        [rank ^ 2, rank, -1],
        [rank ^ 2, rank, -1],
      ]);
      // Inside the node: its own shard (no wait) and the relay of what arrived from the other node (a wait).
      const relays = rows.filter((x) => x[1] === (rank ^ 1));
      expect(relays.filter((x) => x[4] === -1).length).toBe(2);
      expect(relays.filter((x) => x[4]! >= 0).map((x) => Math.floor(x[0]! / shard))).toEqual([rank ^ 2, rank ^ 2]);
    });
    // The copy engine emits the same template (its intra-node-first order, pulls by host copies).
    const ce = await run(["emit", "ag-gemm", ...args, "--out", temp()]);
    expect(ce.status, ce.err).toBe(0);
  });

  it("emits the hierarchical GEMM+RS on 2 nodes x 2 GPUs: node sums inside the node, then over the rail", async () => {
    const dir = temp();
    const args = ["--m", "512", "--n", "256", "--k", "128", "--mesh", "2x2", "--tile", "64x128x64", "--template", "hierarchical"];
    const r = await run(["emit", "gemm-rs", ...args, "--backend", "nvshmem", "--out", dir]);
    expect(r.status, r.err).toBe(0);
    const m = Manifest.parse(JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")));
    expect(m.kernels.map((k) => `${k.name}:${k.template.kind}:${k.stream}`)).toEqual([
      "gemm_rs_m512n256k128_w4_nvshmem_s2_producer:local-producer:compute",
      "nvshmem_push:nvshmem-push:comm",
      "node_sum:slab-sum:compute",
      "nvshmem_push_net:nvshmem-push:comm",
      "rs_reduce:slab-sum:compute",
    ]);
    for (const f of ["nvshmem_push.py", "nvshmem_push_net.py", "node_sum.py", "rs_reduce.py"])
      expect(readFileSync(join(dir, f), "utf8")).toContain("@triton.jit");
    // Over the network (net_segments) only node sums, each to the same GPU of the other node.
    const net = m.tables.find((t) => t.name === "net_segments")!;
    net.values.forEach((flat, rank) => {
      for (let i = 0; i < flat.length; i += 7) if (flat[i + 6]! >= 0) expect(flat[i + 1]).toBe(rank ^ 2);
    });
  });

  it("is refused where it is not built, naming what works", async () => {
    const gemmAr = await run(["emit", "gemm-ar", ...small, "--template", "tilewise", "--backend", "nvshmem", "--out", temp()]);
    expect(gemmAr.status).toBe(2);
    expect(gemmAr.err).toContain("--backend nvshmem realises the partitioned gemm-ar (--template direct); the tile-wise AllReduce");
    const rows = await run(["emit", "ag-gemm", "--shape", "MLP-1", "--world", "2", "--backend", "nvshmem", "--any-rows", "--out", temp()]);
    expect(rows.status).toBe(2);
    expect(rows.err).toContain("drop --backend nvshmem or --any-rows");
    const sim = await run(["simulate", "ag-gemm", "--shape", "MLP-1", "--world", "8", "--backend", "nvshmem"]);
    expect(sim.status).toBe(2);
    expect(sim.err).toContain("the simulator has no model of NVSHMEM puts");
    const rsSm = await run([
      "emit",
      "gemm-rs",
      "--m",
      "512",
      "--n",
      "256",
      "--k",
      "128",
      "--mesh",
      "2x2",
      "--tile",
      "64x128x64",
      "--template",
      "hierarchical",
      "--backend",
      "sm",
      "--out",
      temp(),
    ]);
    expect(rsSm.status).toBe(2);
    expect(rsSm.err).toContain("which GEMM+RS builds on the nvshmem backend");
    const ce = await run(["emit", "ag-gemm", ...small, "--comm-sms", "4", "--out", temp()]);
    expect(ce.status).toBe(2);
    expect(ce.err).toContain("add --backend sm or nvshmem");
  });
});
