"""Copies of a GEMM+AllReduce kernel library (``python -m ovl_runtime kernels gemm-ar ...``, SM transfers) whose
``ar_reduce_broadcast`` differs: its tile's columns (``BLOCK_N``, the slot-wait table's tile counts following) and its
grid (programs per SM of a ``--sms`` SM GPU, capped at the slab's tiles). The kernel source is the emitted one: both
are launch parameters. For A/B runs of the broadcast through the torch API (``torch-api-tp-run.sh``).

    python3 packages/bench/gpu/diag/gemm_ar_broadcast_variants.py out-kern-ar out-kern-ar- n64:block_n=64 g2:per_sm=2 n64g2:block_n=64,per_sm=2
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
from pathlib import Path


def variant(src: Path, dst: Path, block_n: int | None, per_sm: int | None, sms: int) -> None:
    shutil.copytree(src, dst)
    for path in dst.glob("*/manifest.json"):
        m = json.loads(path.read_text())
        k = next(k for k in m["kernels"] if k["template"]["kind"] == "ar-reduce-broadcast")
        bm, n, rows = k["constexprs"]["BLOCK_M"], k["template"]["params"]["N"], k["template"]["params"]["rows_per_rank"]
        if block_n is not None:
            k["constexprs"]["BLOCK_N"] = k["template"]["params"]["BLOCK_N"] = block_n
        tiles = rows // bm * math.ceil(n / k["constexprs"]["BLOCK_N"])
        k["grid"] = [min(per_sm * sms, tiles)] if per_sm is not None else [{"kind": "num-sms", "cap": tiles}]
        # The slot-wait rows wait for every tile of each peer's slab: [slot, tiles] pairs.
        table = next(t for t in m["tables"] if t["name"] == "ar_done_slots")
        table["values"] = [[v if i % 2 == 0 else tiles for i, v in enumerate(row)] for row in table["values"]]
        path.write_text(json.dumps(m, indent=1))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("base", type=Path)
    p.add_argument("prefix")
    p.add_argument("variants", nargs="+", help="name:key=value,... with keys block_n, per_sm")
    p.add_argument("--sms", type=int, default=132)
    a = p.parse_args()
    for spec in a.variants:
        name, _, kv = spec.partition(":")
        opts = dict(x.split("=") for x in kv.split(",") if x)
        out = Path(a.prefix + name)
        shutil.rmtree(out, ignore_errors=True)
        variant(a.base, out, int(opts["block_n"]) if "block_n" in opts else None, int(opts["per_sm"]) if "per_sm" in opts else None, a.sms)
        print(out)


if __name__ == "__main__":
    main()
