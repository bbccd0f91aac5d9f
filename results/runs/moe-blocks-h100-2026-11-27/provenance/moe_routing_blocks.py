"""The valid blocks of the routing the MoE benchmarks draw (``draw_routing(np.random.default_rng(1), S, k, E)``,
as ``moe-compute.py`` and ``diag/moe_blocks.py`` do) at MoE-1…6, per BLOCK_M: each expert's token slots padded
to whole blocks. No GPU. The simulator's MoE calibration prices the measured kernels at these counts
(``diag/moe_blocks.py`` records them in its rows too).

    PYTHONPATH=$PWD/packages/runtime-py/src python3 packages/bench/gpu/moe_routing_blocks.py > routing-blocks.json
"""

from __future__ import annotations

import json

import numpy as np
from ovl_runtime.operators.ag_moe.routing import draw_routing

#: TileLink Table 4 (the MoE benchmarks' shapes; moe-compute.py's SHAPES): name, tokens, hidden,
#: intermediate (all ranks), experts, top-k.
SHAPES = [
    ("MoE-1", 8192, 2048, 1536, 8, 2),
    ("MoE-2", 8192, 2048, 1536, 32, 2),
    ("MoE-3", 8192, 2048, 1536, 32, 5),
    ("MoE-4", 8192, 4096, 2048, 8, 2),
    ("MoE-5", 8192, 4096, 2048, 32, 2),
    ("MoE-6", 8192, 4096, 2048, 32, 5),
]
BLOCK_MS = (64, 128)


def blocks(ids: np.ndarray, experts: int, block_m: int) -> int:
    counts = np.bincount(ids.reshape(-1), minlength=experts)
    return int(sum(-(-int(c) // block_m) for c in counts))


def main() -> None:
    out = {}
    for name, S, _H, _I, E, k in SHAPES:
        ids = draw_routing(np.random.default_rng(1), S, k, E)
        out[name] = {str(bm): blocks(ids, E, bm) for bm in BLOCK_MS}
    print(json.dumps({"routing": "draw_routing(np.random.default_rng(1), S, k, E)", "blocks": out}, indent=1))


if __name__ == "__main__":
    main()
