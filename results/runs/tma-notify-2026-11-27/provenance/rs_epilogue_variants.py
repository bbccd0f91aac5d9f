"""Adds epilogue and notify variants of the cooperative TLX GEMM+RS kernels of a compute benchmark directory.

    python3 packages/bench/gpu/diag/rs_epilogue_variants.py <bench-dir> rs_mlp1_w8,rs_mlp2_w8,...

Keeps the named shapes of ``<bench-dir>/compute.json`` (``emit-compute.ts bench --ops gemm-rs`` plus
``emit-tlx-compute.ts --variants coop128x256s4,coop128x256s4pn,coop128x256k32s8pn``), drops their
``previous`` cases and adds hand-edited copies of the cooperative TLX kernels (timing; the slots are
checked by ``rs_variant_slots.py``):

- ``q4``: the epilogue as four quarter-width TMA stores through two staging slices per consumer, each
  slice's reuse waiting only for the store two back (the emitted epilogue waits for each half's store
  to leave shared memory before it goes on).
- ``tmared``: the tile-done notify as a TMA reduce-add issued by the leading consumer warp group (a
  one-hot 16-byte vector, from a 128-byte aligned row of shared memory, added at the slot's 16-byte
  aligned group of four: its neighbours get 0, the box clipped at the buffer's end), once both consumer warp groups'
  stores of the tile are complete, with no fence and no producer part: no thread stalls on a release.
- ``noatom``: the producer-notified kernel without its release adds (what the notify's fence costs).

TLX copies go to ``<case-dir>_<tag>/`` without their cubins: compile them with
``scripts/tlx-aot-compile.py`` before carrying the directory.
"""

import re

from variant_cases import variant_case, variants_cli

HALVES = """                halves = tl.permute(tl.reshape(acc, (SPLIT_M, 2, EPI_N)), (0, 2, 1))
                acc0, acc1 = tl.split(halves)
                c_desc.store([offs_am + cid * SPLIT_M, offs_bn], acc0.to(tl.bfloat16))
                c_desc.store([offs_am + cid * SPLIT_M, offs_bn + EPI_N], acc1.to(tl.bfloat16))
"""


def quarter_stores() -> str:
    lines = [
        "                halves = tl.permute(tl.reshape(acc, (SPLIT_M, 2, EPI_N)), (0, 2, 1))",
        "                acc0, acc1 = tl.split(halves)",
        "                q0, q1 = tl.split(tl.permute(tl.reshape(acc0, (SPLIT_M, 2, EPI_N // 2)), (0, 2, 1)))",
        "                q2, q3 = tl.split(tl.permute(tl.reshape(acc1, (SPLIT_M, 2, EPI_N // 2)), (0, 2, 1)))",
    ]
    for q in range(4):
        buf = f"tlx.local_view(c_stage, cid * 2 + {q % 2})"
        lines += [
            "                tlx.async_descriptor_store_wait(1)",
            f"                tlx.local_store({buf}, q{q}.to(tl.bfloat16))",
            "                tlx.fence_async_shared()",
            f"                tlx.async_descriptor_store(cq_desc, {buf}, [offs_am + cid * SPLIT_M, offs_bn + {q} * (EPI_N // 2)])",
        ]
    return "\n".join(lines) + "\n"


C_DESC = "    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[SPLIT_M, EPI_N])\n"
B_RING_RE = re.compile(r"    b_ring = tlx\.local_alloc\(\(BLOCK_K, BLOCK_N\), tl\.bfloat16, NUM_STAGES\)\n")


def edit_q4(src: str) -> str:
    assert src.count(HALVES) == 1, "halves"
    src = src.replace(HALVES, quarter_stores())
    src = src.replace(
        C_DESC,
        C_DESC + "    cq_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[SPLIT_M, EPI_N // 2])\n",
    )
    m = B_RING_RE.search(src)
    assert m, "ring"
    src = src[: m.end()] + "    c_stage = tlx.local_alloc((SPLIT_M, EPI_N // 2), tl.bfloat16, 2 * NUM_CONSUMERS)\n" + src[m.end() :]
    # The previous tile's stores are the groups before this tile's four.
    old = 'tl.inline_asm_elementwise("cp.async.bulk.wait_group 2; mov.b32 $0, 0;"'
    src = src.replace(old, 'tl.inline_asm_elementwise("cp.async.bulk.wait_group 4; mov.b32 $0, 0;"')
    # The last tile's stores must leave shared memory before the kernel exits.
    return src


def edit_noatom(src: str) -> str:
    out = re.sub(
        r'tl\.atomic_add\(sig_ptr \+ (stored_slot_\d), 1, sem="release", scope="sys"\)',
        lambda m: f"{m.group(1)} = {m.group(1)}",
        src,
    )
    assert out != src, "noatom"
    return out


PRODUCER_NOTIFY = re.compile(
    r"                own_tile = \(tile_id - tl\.program_id\(0\)\) // tl\.num_programs\(0\)\n.*?"
    r"                stored_slot_1 = tl\.load\(notify_ptr \+ pid_m\)\n",
    re.DOTALL,
)
PRODUCER_OWED = re.compile(r"            # The tiles still owed.*?(?=        with tlx\.async_task\(num_warps=4, replicate=2)", re.DOTALL)
CONSUMER_REPORT = re.compile(
    r"                # This warp group's previous tile's stores.*?(?=            tl\.inline_asm_elementwise\(\"cp\.async\.bulk\.wait_group 0)",
    re.DOTALL,
)
CONSUMER_EXIT = re.compile(r"            tl\.inline_asm_elementwise\(\"cp\.async\.bulk\.wait_group 0.*\Z", re.DOTALL)


REDUCE_SLOT = """@triton.jit
def reduce_slot(sig_desc, onehot, slot):
    # onehot holds four 128-byte aligned rows; row j is 1 at j. Add row slot % 4 at slot's aligned group of four.
    r = slot % 4
    at = slot - r
    if r == 0:
        tlx.async_descriptor_store(sig_desc, tlx.local_slice(onehot, [0], [4]), [at], store_reduce="add")
    elif r == 1:
        tlx.async_descriptor_store(sig_desc, tlx.local_slice(onehot, [32], [4]), [at], store_reduce="add")
    elif r == 2:
        tlx.async_descriptor_store(sig_desc, tlx.local_slice(onehot, [64], [4]), [at], store_reduce="add")
    else:
        tlx.async_descriptor_store(sig_desc, tlx.local_slice(onehot, [96], [4]), [at], store_reduce="add")


"""


def edit_tmared(src: str, slots: int, groups: int) -> str:
    """Consumers notify by TMA reduce-add; the producer's notify part goes."""
    i = src.index("@triton.jit")
    src = src[:i] + REDUCE_SLOT + src[i:]
    src, n = PRODUCER_NOTIFY.subn("", src)
    assert n == 1, "producer notify"
    src, n = PRODUCER_OWED.subn("", src)
    assert n == 1, "owed"
    src = re.sub(r"            stored_slot_\d = -1\n", "", src)
    src = src.replace(
        "    stored_bars = tlx.alloc_barriers(num_barriers=8, arrive_count=2)\n",
        "    onehot = tlx.local_view(tlx.local_alloc((128,), tl.int32, 1), 0)\n",
    )
    report = (
        "                # Both warp groups' previous-tile stores complete, then one TMA reduce-add on its slot.\n"
        f'                tl.inline_asm_elementwise("cp.async.bulk.wait_group {groups}; mov.b32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)\n'
        "                tlx.named_barrier_wait(13, 256)\n"
        "                if cid == 0:\n"
        "                    if stored_slot >= 0:\n"
        "                        reduce_slot(sig_desc, onehot, stored_slot)\n"
        "                stored_slot = tl.load(notify_ptr + pid_m)\n"
    )
    src, n = CONSUMER_REPORT.subn(report, src)
    assert n == 1, "report"
    exit_ = (
        '            tl.inline_asm_elementwise("cp.async.bulk.wait_group 0; mov.b32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)\n'
        "            tlx.named_barrier_wait(13, 256)\n"
        "            if cid == 0:\n"
        "                if stored_slot >= 0:\n"
        "                    reduce_slot(sig_desc, onehot, stored_slot)\n"
        "                tlx.async_descriptor_store_wait(0)\n"
    )
    src, n = CONSUMER_EXIT.subn(exit_, src)
    assert n == 1, "exit"
    init = (
        f"            sig_desc = tl.make_tensor_descriptor(sig_ptr, shape=[{slots}], strides=[1], block_shape=[4])\n"
        "            stored_slot = -1\n"
        "            if cid == 0:\n"
        "                tlx.local_store(onehot, (tl.arange(0, 128) % 33 == 0).to(tl.int32))\n"
        "                tlx.fence_async_shared()\n"
    )
    assert src.count("            stored_tile = -1\n") == 1, "init"
    return src.replace("            stored_tile = -1\n", init)


def variants_of(label: str) -> list[str]:
    if label == "tlx coop128x256s4":
        return ["q4"]
    if label in ("tlx emitted coop128x256s4pn", "tlx emitted coop128x256k32s8pn"):
        return ["q4", "tmared", "tmared q4", "noatom"]
    return []


def edited(src: str, tag: str, slots: int) -> str:
    out = src
    if "tmared" in tag:
        out = edit_tmared(out, slots, 4 if "q4" in tag else 2)
    if "q4" in tag:
        out = edit_q4(out)
    if tag == "noatom":
        out = edit_noatom(out)
    return out


def _expect_of(tag: str):
    """The PTX expectations of a variant: no release adds once they are gone, a TMA reduce where it notifies."""
    if "tmared" not in tag and tag != "noatom":
        return None
    reduce = ["cp\\.reduce\\.async\\.bulk\\.tensor"] if "tmared" in tag else []
    return lambda expect: {k: [p for p in v if "release" not in p] + reduce for k, v in expect.items()}


def variants(d: str, _shape: dict, c: dict) -> list[dict]:
    sig = next((a for a in c["args"] if a["kind"] == "signals"), None)
    size = sig["size"] if sig else 0
    return [variant_case(d, c, tag, lambda src, tag=tag: edited(src, tag, size), _expect_of(tag)) for tag in variants_of(c["label"])]


if __name__ == "__main__":
    variants_cli(variants, __doc__)
