"""Adds notify-timing and notify-scope variants of the Triton GEMM+RS producers of a compute benchmark directory (timing only).

    python3 packages/bench/gpu/diag/deferred_notify_variants.py <bench-dir> rs_mlp1_w4,rs_mlp2_w8,...

Keeps the named shapes of ``<bench-dir>/compute.json`` (``emit-compute.ts bench --ops gemm-rs``, optionally
with ``emit-tlx-compute.ts`` cases), drops their ``previous`` cases and adds, beside every emitted Triton
case, hand-edited copies of its kernel. Where the emitted kernel notifies each tile right after its stores
(``notifyAt: "tile"``):

- ``dn``: the tile-done notify of tile i issued after tile i+1's K loop, just before its epilogue (and
  the last tile's after the tile loop), as ``notifyAt: "next-tile"`` emits it. ``notify_slot`` completes
  the thread's bulk (TMA) stores before its release; right after a tile's stores that wait is the stores'
  whole write latency, with the tensor cores idle; one K loop later the stores are long done.
- ``gpu``: the notify at gpu scope (``notify_slot_gpu``), as GEMM+RS over SM pushes emits it.
- ``dn gpu``: both.

Where it already notifies at ``next-tile``, the same three the other way round: ``tile`` (right after
the stores), ``gpu`` and ``tile gpu``. The edits change when the notifies happen, not the GEMM: the runs
check the output as every run does, not the slots.
"""

import re
from pathlib import Path

from variant_cases import variants_cli

NOTIFY = re.compile(r"^(?P<indent>[ \t]+)(?P<fn>notify_slot(?:_gpu)?)\(ovl_sig_ptr, ovl_slot0, ovl_slot0 >= 0\)\n", re.MULTILINE)
TILE_LOOP = re.compile(r"^(?P<indent>[ \t]+)for tile_id in tl\.range\(.*# ovl: tile-loop\n", re.MULTILINE)
K_LOOP = re.compile(r"^(?P<indent>[ \t]+)for ki in range\(k_tiles\):\n(?:(?P=indent)[ \t]+.*\n)+", re.MULTILINE)


def deferred(src: str) -> str:
    """The notify of the previous tile before this tile's epilogue; the last one after the loop."""
    n = NOTIFY.search(src)
    loop = TILE_LOOP.search(src)
    k = K_LOOP.search(src)
    if n is None or loop is None or k is None or not (loop.end() < k.start() < n.start()):
        raise SystemExit("not a persistent producer with a K loop and a notify after its stores")
    fn, body = n["fn"], n["indent"]
    call = f"{fn}(ovl_sig_ptr, ovl_prev0, ovl_prev0 >= 0)"
    out = src[: n.start()] + f"{body}ovl_prev0 = ovl_slot0\n" + src[n.end() :]
    out = out[: k.end()] + f"{body}{call}\n" + out[k.end() :]
    out = out[: loop.start()] + f"{loop['indent']}ovl_prev0 = -1\n" + out[loop.start() :]
    return out.rstrip("\n") + f"\n{loop['indent']}{call}\n"


PENDING = re.compile(r"^[ \t]+(notify_slot(?:_gpu)?)\(ovl_sig_ptr, ovl_prev0, ovl_prev0 >= 0\)\n", re.MULTILINE)
PREV_INIT = re.compile(r"^[ \t]+ovl_prev0 = -1\n", re.MULTILINE)
PREV_SET = re.compile(r"^(?P<indent>[ \t]+)ovl_prev0 = ovl_slot0\n", re.MULTILINE)


def immediate(src: str) -> str:
    """The inverse of ``deferred``: each tile's notify right after its stores (``notifyAt: "tile"``)."""
    calls = PENDING.findall(src)
    if len(calls) != 2 or PREV_INIT.search(src) is None or PREV_SET.search(src) is None:
        raise SystemExit("not a producer that notifies a tile later")
    out = PENDING.sub("", PREV_INIT.sub("", src))
    return PREV_SET.sub(lambda m: f"{m['indent']}{calls[0]}(ovl_sig_ptr, ovl_slot0, ovl_slot0 >= 0)\n", out)


def gpu_scope(src: str) -> str:
    out = src.replace("notify_slot", "notify_slot_gpu")
    if out == src:
        raise SystemExit("the gpu edit changed nothing")
    return out


EDITS = {"dn": deferred, "gpu": gpu_scope, "dn gpu": lambda s: deferred(gpu_scope(s))}
EDITS_DEFERRED = {"tile": immediate, "gpu": gpu_scope, "tile gpu": lambda s: immediate(gpu_scope(s))}


def variants(d: str, _shape: dict, case: dict) -> list[dict]:
    if case["kind"] != "emitted" or "cubin" in case:
        return []
    src = Path(d, case["file"]).read_text()
    out = []
    for tag, edit in (EDITS_DEFERRED if "ovl_prev0" in src else EDITS).items():
        v = dict(case, label=f"{case['label']} {tag}", file=case["file"].replace(".py", f"_{tag.replace(' ', '_')}.py"))
        Path(d, v["file"]).write_text(edit(src))
        out.append(v)
    return out


if __name__ == "__main__":
    variants_cli(variants, __doc__)
