"""The MoE benchmarks' fused-MoE baseline (``packages/bench/gpu/fused_moe.py``) computes what it is
compared against, under Triton's interpreter on the CPU: part 1's gather + expert GEMM (A holds tokens,
slot ``t·k + j`` reads token t) and part 2's expert GEMM of slot rows scaled by the routing weights,
at every configuration the benchmark times, on fresh routings that leave experts without tokens or put
every token on one expert."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from ovl_runtime._emulate.interpret_load import interpret_unavailable  # noqa: E402
from ovl_runtime.operators.ag_moe.routing import draw_routing  # noqa: E402

BASELINE = Path(__file__).resolve().parents[2] / "bench" / "gpu" / "fused_moe.py"

pytestmark = pytest.mark.skipif(bool(interpret_unavailable()), reason=str(interpret_unavailable()))


def _module():
    spec = importlib.util.spec_from_file_location("ovl_bench_fused_moe", BASELINE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _slots_reference(a, w, ids, a_div, weights=None):
    flat = ids.reshape(-1).long()
    out = torch.zeros(flat.numel(), w.shape[2], dtype=torch.float32)
    for s in range(flat.numel()):
        out[s] = a[s // a_div].float() @ w[flat[s]].float()
    if weights is not None:
        out *= weights.reshape(-1, 1).float()
    return out


ROUTINGS = [
    ("uniform", lambda rng, t, k, e: draw_routing(rng, t, k, e)),
    ("one-expert-empty", lambda rng, t, k, e: draw_routing(rng, t, k, e, choices=np.arange(1, e))),
    ("all-on-the-first-k", lambda rng, t, k, e: np.tile(np.arange(k, dtype=np.int32), (t, 1))),
]


@pytest.mark.parametrize("routing", [r[0] for r in ROUTINGS])
@pytest.mark.parametrize("part", [1, 2])
def test_the_fused_moe_baseline_matches_its_reference(routing, part):
    from ovl_runtime._emulate.interpret_patch import patched

    mod = _module()
    draw = dict(ROUTINGS)[routing]
    seed = np.random.SeedSequence().entropy
    rng = np.random.default_rng(seed)
    tokens, k, experts, hidden, n = 24, 2, 4, 40, 72  # K and N not multiples of the tiles
    ids = torch.from_numpy(draw(rng, tokens, k, experts))
    gen = torch.Generator().manual_seed(int(rng.integers(1 << 30)))
    if part == 1:
        a = torch.randn(tokens, hidden, generator=gen).to(torch.bfloat16)
        weights, a_div = None, k
    else:
        a = torch.randn(tokens * k, hidden, generator=gen).to(torch.bfloat16)
        weights, a_div = torch.rand(tokens, k, generator=gen), 1
    w = torch.randn(experts, hidden, n, generator=gen).to(torch.bfloat16)
    want = _slots_reference(a, w, ids, a_div, weights)
    # Two configurations per run keep the interpreter's time down; every one is a GEMM of the same code.
    picked = mod.CONFIGS[:1] + mod.CONFIGS[-1:]
    with patched():
        cases = mod.cases(a, w, ids, a_div=a_div, weights=weights, configs=picked)
        assert [c[0] for c in cases] == [f"fused_moe {mod.config_name(cfg)}" for cfg in picked]
        for name, fn, c in cases:
            c.fill_(float("nan"))
            fn()
            err = ((c.float() - want).norm() / want.norm()).item()
            assert err < 2e-2, f"{name}: relative error {err} (seed {seed})"


def test_tables_for_another_block_are_refused():
    mod = _module()
    a, w, c = torch.zeros(4, 8), torch.zeros(1, 8, 8), torch.zeros(4, 8)
    tables = (torch.full((64,), 4, dtype=torch.int32), torch.zeros(1, dtype=torch.int32), torch.ones(2, dtype=torch.int32))
    with pytest.raises(ValueError, match="another BLOCK_M"):
        mod.launcher(a, w, c, tables, (128, 64, 32, 8, 4, 3), a_div=1)
    with pytest.raises(ValueError, match="do not chain"):
        mod.launcher(a, torch.zeros(1, 16, 8), c, tables, (64, 64, 32, 8, 4, 3), a_div=1)
