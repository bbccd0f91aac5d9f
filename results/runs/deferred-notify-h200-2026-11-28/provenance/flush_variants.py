"""Adds, beside every TLX GEMM+RS backend kernel of a compute benchmark directory, a copy without the notify of a
program's last two tiles at once (`noflush`: every tile notified with the next one, as before that flush), timing
only.

    python3 packages/bench/gpu/diag/flush_variants.py <bench-dir> rs_mlp1_w4,rs_mlp2_w8,...

The copies go to ``<case-dir>_noflush/`` without cubins: compile them with ``scripts/tlx-aot-compile.py``.
"""

import re

from variant_cases import variant_case, variants_cli

FLUSH = re.compile(
    r"^(?P<i>[ ]+)if (?:tile_id \+ 2 \* tl\.num_programs\(0\) >= num_tiles|pair_id \+ tl\.num_programs\(0\) >= num_pid_p \* num_pid_n):\n"
    r"(?:(?P=i)[ ]+.*\n)+",
    re.MULTILINE,
)


def without_flush(src: str) -> str:
    out, n = FLUSH.subn("", src)
    if n != 1:
        raise SystemExit(f"expected one flush block, found {n}")
    return out


def variants(d: str, _shape: dict, c: dict) -> list[dict]:
    return [variant_case(d, c, "noflush", without_flush)] if c.get("role") == "tlx-emitted" else []


if __name__ == "__main__":
    variants_cli(variants, __doc__)
