"""The emitter's moe-rs sizes and slab cover (``@ovl/tlx-emitter``'s ``moeRsSizes`` / ``slabCover``)
against the runner's (``check_moe_rs``, ``slab_cover_reference`` over ``moe_align_reference``'s
tables), for fresh random routings: experts left without tokens, and every token on one expert."""

from __future__ import annotations

import json

import numpy as np
from builders import compile_cases

from ovl_runtime.operators.ag_moe.routing import moe_align_reference
from ovl_runtime.operators.moe_rs.kernels import check_moe_rs, slab_cover_reference

# Writes, per case, the emitter's sizes and its slab cover of the routing the case carries.
SCRIPT = """
import { writeFileSync } from "node:fs";
const { moeRsSizes, slabCover } = await import(process.argv[1]);
const rows = JSON.parse(process.argv[4]);
const out = rows.map((c) => {
  const s = moeRsSizes(
    { tokens: c.T, inter: 8, hidden: 8, world: c.world, slabT: c.slabT },
    { experts: c.experts, topk: c.topk },
    { BM: c.blockM, BN: 8, BK: 8 },
  );
  return { slabs: s.slabs, slabsPerRank: s.slabsPerRank, slabT: s.slabT, cover: slabCover(c.sorted, c.nb, s) };
});
writeFileSync(process.argv[2] + "/sizes.json", JSON.stringify(out));
"""


def _cases(rng: np.random.Generator, n: int) -> list[tuple]:
    cases = []
    for i in range(n):
        world = int(rng.choice([1, 2, 4, 8]))
        per_rank = int(rng.choice([8, 16, 32, 48]))
        T, experts, block_m = per_rank * world, int(rng.integers(1, 9)), int(rng.choice([16, 32, 64]))
        topk = int(rng.integers(1, experts + 1))
        div = int(rng.choice([1, 2, 4]))
        slab_t = per_rank // div if per_rank % div == 0 else per_rank
        if i % 4 == 0:  # every token on one expert
            ids = np.full((T, topk), int(rng.integers(0, experts)), dtype=np.int32)
        else:  # distinct experts per token, some experts possibly without tokens
            ids = np.stack([rng.choice(experts, size=topk, replace=False) for _ in range(T)]).astype(np.int32)
        sorted_ids, _, nb = moe_align_reference(ids, experts, block_m)
        sorted_list = [int(x) for x in np.asarray(sorted_ids)[: int(nb) * block_m]]
        cases.append((T, world, experts, topk, block_m, slab_t, sorted_list, int(nb), ids.tolist()))
    return cases


def test_emitter_sizes_and_cover_match_the_runner(tmp_path_factory):
    cases = _cases(np.random.default_rng(), 24)
    keys = ["T", "world", "experts", "topk", "blockM", "slabT", "sorted", "nb", "ids"]
    out = compile_cases(tmp_path_factory, "moe_rs_sizes", SCRIPT, keys, cases)
    got = json.loads((out / "sizes.json").read_text())
    assert len(got) == len(cases)
    for c, ts in zip(cases, got, strict=True):
        T, world, experts, topk, block_m, slab_t, sorted_list, nb, ids = c
        sz = check_moe_rs(T, topk, experts, 8, 8, world, slab_t)
        assert (ts["slabs"], ts["slabsPerRank"], ts["slabT"]) == (sz.slabs, sz.slabs_per_rank, sz.slab_t)
        sorted_ids, _, _ = moe_align_reference(np.asarray(ids, dtype=np.int32), experts, block_m)
        cover = slab_cover_reference(np.asarray(sorted_ids), nb, block_m, topk, sz.slab_t, sz.slabs)
        assert ts["cover"] == [int(x) for x in cover]
        # Every token has k slots, so every slab is covered by at least one block.
        assert min(ts["cover"]) >= 1
