"""Adds notify-scope variants of the GEMM+RS kernels of a compute benchmark directory (timing only).

    python3 packages/bench/gpu/diag/notify_scope_variants.py <bench-dir> rs_mlp1_w8,rs_mlp2_w8,...

Keeps the named shapes of ``<bench-dir>/compute.json`` (``emit-compute.ts bench --ops gemm-rs``
plus ``emit-tlx-compute.ts``), drops their ``previous`` cases and adds, beside every emitted
case, two hand-edited copies of its kernel:

- ``gpu``: the tile-done release adds at gpu scope (Triton: ``notify_slot_gpu``; TLX: the
  ``"sys"`` scope literals) — what GEMM+RS with SM pushes emits.
- ``2l``: two-level notifies — per tile an acq_rel add at gpu scope on a counter of the slot
  (in the signal buffer, after the slots: the case's signal buffer doubled), and the slot's
  last tile resets the counter and release-adds the slot's whole tile count at system scope,
  so one system-scope release serves a chunk.

TLX copies go to ``<case-dir>_<tag>/`` without their cubins: compile them with
``scripts/tlx-aot-compile.py`` before carrying the directory. The edits change what the
notifies do, not the GEMM: the runs check the output as every run does, not the slots.
"""

import os
import re
import shutil
from pathlib import Path

from variant_cases import variants_cli

COUNTED_TRITON = """@triton.jit
def _counted_notify(sig_ptr, slot, mask, TILES: tl.constexpr, NSLOTS: tl.constexpr):
    _stores_done()
    old = tl.atomic_add(sig_ptr + NSLOTS + slot, 1, mask=mask, sem="acq_rel", scope="gpu")
    last = mask & (old == TILES - 1)
    tl.atomic_xchg(sig_ptr + NSLOTS + slot, 0, mask=last, sem="relaxed", scope="gpu")
    tl.atomic_add(sig_ptr + slot, TILES, mask=last, sem="release", scope="sys")
"""
COUNTED_TLX = """@triton.jit
def _counted(sig_ptr, slot, TILES: tl.constexpr, NSLOTS: tl.constexpr):
    old = tl.atomic_add(sig_ptr + NSLOTS + slot, 1, sem="acq_rel", scope="gpu")
    if old == TILES - 1:
        tl.atomic_xchg(sig_ptr + NSLOTS + slot, 0, sem="relaxed", scope="gpu")
        tl.atomic_add(sig_ptr + slot, TILES, sem="release", scope="sys")
"""
TLX_ADD = re.compile(r'tl\.atomic_add\(sig_ptr \+ ([A-Za-z_0-9]+), 1, sem="release", scope=(?:SCOPE|"sys")\)')
TRITON_NOTIFY = re.compile(r"notify_slot\(([^,]+), ([^,]+), ([^)]+)\)")


def before_first_kernel(src: str, text: str) -> str:
    i = src.index("@triton.jit")
    return src[:i] + text + "\n\n" + src[i:]


def tiles_per_slot(shape: dict, case: dict) -> int:
    """Tiles that notify each slot (the same for every slot of these plans)."""
    table = next(a for a in case["args"] if a["kind"] == "table" and a["name"] in ("notify_ptr", "ovl_notify0"))
    counts: dict[int, int] = {}
    for v in table["values"]:
        if v >= 0:
            counts[v] = counts.get(v, 0) + 1
    # A table per tile (the Triton producer's) or per m-block (the TLX kernel's: times the n-tiles).
    per = 1 if len(table["values"]) == case["tiles"] else -(-shape["N"] // case["config"]["BN"])
    tiles = {n * per for n in counts.values()}
    if len(tiles) != 1:
        raise SystemExit(f"{shape['name']} {case['label']}: slots of different tile counts {counts}")
    return tiles.pop()


def edited(src: str, tag: str, tlx: bool, tiles: int, nslots: int) -> str:
    if tag == "gpu":
        out = src.replace('"sys"', '"gpu"') if tlx else src.replace("notify_slot", "notify_slot_gpu")
    elif tlx:
        out = TLX_ADD.sub(lambda m: f"_counted(sig_ptr, {m.group(1)}, {tiles}, {nslots})", before_first_kernel(src, COUNTED_TLX))
    else:
        src = src.replace("from ovl_runtime.language import notify_slot", "from ovl_runtime.language import _stores_done")
        out = TRITON_NOTIFY.sub(
            lambda m: f"_counted_notify({m.group(1)}, {m.group(2)}, {m.group(3)}, {tiles}, {nslots})",
            before_first_kernel(src, COUNTED_TRITON),
        )
    if out == src:
        raise SystemExit(f"the {tag} edit changed nothing")
    return out


def variants(d: str, s: dict, c: dict) -> list[dict]:
    if c["kind"] != "emitted":
        return []
    sig = next(a for a in c["args"] if a["kind"] == "signals")
    tiles = tiles_per_slot(s, c)
    tlx = "cubin" in c
    out = []
    for tag in ("gpu", "2l"):
        v = dict(c, label=f"{c['label']} {tag}")
        if tlx:
            old_dir = os.path.dirname(c["file"])
            new_dir = f"{old_dir}_{tag}"
            shutil.rmtree(os.path.join(d, new_dir), ignore_errors=True)
            shutil.copytree(
                os.path.join(d, old_dir),
                os.path.join(d, new_dir),
                ignore=shutil.ignore_patterns("*.cubin", "*.sm_90a.json"),
            )
            for k in ("file", "cubin", "metadata"):
                v[k] = c[k].replace(old_dir, new_dir)
        else:
            v["file"] = c["file"].replace(".py", f"_{tag}.py")
        src = Path(d, c["file"]).read_text()
        Path(d, v["file"]).write_text(edited(src, tag, tlx, tiles, sig["size"]))
        if tag == "2l":
            v["args"] = [dict(a, size=2 * a["size"]) if a["kind"] == "signals" else a for a in c["args"]]
        out.append(v)
    return out


if __name__ == "__main__":
    variants_cli(variants, __doc__)
