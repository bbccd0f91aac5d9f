"""Splits the gap between the plain TLX GEMM and the TLX backend's GEMM+RS kernel into its parts.

    python3 packages/bench/gpu/diag/rs_gap_variants.py <bench-dir> rs_mlp1_w2,rs_mlp2_w4,...

Keeps the named shapes of ``<bench-dir>/compute.json`` (``emit-compute.ts bench --ops gemm-rs`` plus
``emit-tlx-compute.ts --variants coop128x256s4,coop128x256s4q,coop128x256s4qtn``, at a commit whose TLX
kernels still load their order and notify tables), keeps only the cases named in ``KEEP`` and adds
hand-edited copies of the TMA-reduce-notified kernel, each leaving out one thing it does beyond the
plain GEMM (timing only: the ones without the notify or the barrier do not keep the slots' contract):

- ``visit``: the m-blocks in the plain GEMM's order (``pid_m = visit_m``), not the sending order
  read from ``order_ptr`` a tile ahead.
- ``nonotify``: no per-tile notify (no ``cp.async.bulk.wait_group``, no named barrier, no reduce-add).
- ``nobar``: the per-tile notify without the named barrier that joins the two consumer warp groups.
- ``nowg``: the per-tile notify without waiting for the previous tile's stores to complete.
- ``visit nonotify``: both — the plain GEMM but for the notify's setup (its descriptor, its row).

TLX copies go to ``<case-dir>_<tag>/`` without their cubins: compile them with
``scripts/tlx-aot-compile.py`` before carrying the directory.
"""

import re

from variant_cases import cli, load_bench, variant_case, write_bench

KEEP = ("tlx coop128x256s4", "tlx coop128x256s4q", "tlx emitted coop128x256s4q", "tlx emitted coop128x256s4qtn")
TARGET = "tlx emitted coop128x256s4qtn"
TAGS = ("visit", "nonotify", "nobar", "nowg", "visit nonotify")

LOOP_NOTIFY = re.compile(
    r'                tl\.inline_asm_elementwise\("cp\.async\.bulk\.wait_group 4; mov\.b32 \$0, 0;".*?\n'
    r"                tlx\.named_barrier_wait\(11, 256\)\n"
    r"                if cid == 0:\n"
    r"                    if pending_slot >= 0:\n"
    r"                        tile_reduce_notify\(sig_desc, notify_rows, pending_slot\)\n"
    r"                pending_slot = tl\.load\(notify_ptr \+ pid_m\)\n"
)


def edit(src: str, tag: str) -> str:
    out = src
    if "visit" in tag:
        out, n = re.subn(r"(\n +)pid_m = next_pid_m\n", r"\1pid_m = visit_m\n", out)
        assert n == 2, f"visit: {n}"
    if "nonotify" in tag:
        out, n = LOOP_NOTIFY.subn("                pending_slot = tl.load(notify_ptr + pid_m)\n", out)
        assert n == 1, "nonotify"
    if tag == "nobar":
        out, n = re.subn(r"(wait_group 4;.*\n)                tlx\.named_barrier_wait\(11, 256\)\n", r"\1", out)
        assert n == 1, "nobar"
    if tag == "nowg":
        out, n = re.subn(r'                tl\.inline_asm_elementwise\("cp\.async\.bulk\.wait_group 4;.*\n', "", out)
        assert n == 1, "nowg"
    assert out != src, tag
    return out


def main(d: str, names: set[str]) -> None:
    bench, selected = load_bench(d, names)
    shapes = []
    for s in selected:
        cases = [c for c in s["cases"] if c["label"] in KEEP]
        target = next(c for c in cases if c["label"] == TARGET)
        for tag in TAGS:
            # Without the per-tile notify or its store wait, only the last tile's wait (group 0) is left.
            drop_wait = "nonotify" in tag or tag == "nowg"
            expect = (lambda x: {k: [p for p in v if "[1-4]" not in p] for k, v in x.items()}) if drop_wait else None
            cases.append(variant_case(d, target, tag, lambda src, tag=tag: edit(src, tag), expect))
        shapes.append(dict(s, cases=cases))
    write_bench(d, bench, shapes)


if __name__ == "__main__":
    cli(main, __doc__)
