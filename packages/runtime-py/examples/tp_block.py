"""A LLaMA-style tensor-parallel transformer block on ovl's overlapped operators.

The block (RMSNorm → causal grouped-query attention with rotary embeddings → residual →
RMSNorm → SiLU-gated MLP → residual) is split over a group Megatron-style with
sequence-parallel activations: every rank holds ``seq / world`` token rows between the
layers. The QKV and gate/up projections are AllGather+GEMMs (``ovl_runtime.ops.
all_gather_matmul``: the gather of the token rows hidden behind the GEMM), the output and
down projections GEMM+ReduceScatters (``matmul_reduce_scatter``); attention runs on each
rank's heads over the whole sequence.

Three ways to run it::

    # 1. Compile the kernels it needs (on a machine with Node and ovl's CLI), into a library:
    OVL_CLI="node packages/cli/dist/bin.js" python examples/tp_block.py --prepare kernels/ --world 8

    # 2. Check it on one GPU, every rank in this process, against the plain PyTorch block:
    OVL_KERNELS=kernels/ python examples/tp_block.py --world 8

    # 3. Under torchrun, one rank per GPU (same check, the reference computed on every rank):
    OVL_KERNELS=kernels/ torchrun --nproc_per_node=8 examples/tp_block.py --torchrun

``--train`` adds one training step to the check (and its kernels to ``--prepare``): the gradients of the
input and of the norms' weights against the plain block's; each input gradient runs the dual overlapped
operator (``ovl_runtime.autograd``).

The one-GPU check is a correctness run: its times are not performance figures.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from ovl_runtime import ops
from ovl_runtime._kernels.library import KernelKey, call_key, ensure_compiled
from ovl_runtime.groups import DistGroup, Group, OneGpuGroup
from ovl_runtime.nn import TensorParallelMLP


@dataclass(frozen=True)
class Config:
    """The block's sizes: ``seq`` tokens (batch 1), ``heads`` query heads and ``kv_heads``
    key/value heads of ``head_dim``, ``hidden`` model width, ``intermediate`` MLP width."""

    seq: int = 1024
    hidden: int = 1024
    heads: int = 16
    kv_heads: int = 8
    head_dim: int = 64
    intermediate: int = 4096
    eps: float = 1e-5

    def keys(self, world: int, train: bool = False) -> list[KernelKey]:
        """The compiled operators a block over ``world`` ranks calls (``train``: its backward's too)."""
        q, kv, inter = self.heads // world, self.kv_heads // world, self.intermediate // world
        forward = [
            call_key("ag-gemm", world, self.seq, (q + 2 * kv) * self.head_dim, self.hidden),
            call_key("gemm-rs", world, self.seq, self.hidden, q * self.head_dim),
            KernelKey("ag-gemm-silu", world, self.seq, inter, self.hidden),
            call_key("gemm-rs", world, self.seq, self.hidden, inter),
        ]
        if not train:
            return forward
        # Where autograd records, the gate/up projection is an AllGather+GEMM (its product kept for the backward);
        # each input gradient runs the dual operator: AllGather+GEMM's a GEMM+ReduceScatter and the reverse.
        return forward + [
            call_key("ag-gemm", world, self.seq, 2 * inter, self.hidden),  # gate/up where autograd records
            call_key("gemm-rs", world, self.seq, self.hidden, (q + 2 * kv) * self.head_dim),
            call_key("ag-gemm", world, self.seq, q * self.head_dim, self.hidden),
            call_key("gemm-rs", world, self.seq, self.hidden, 2 * inter),
            call_key("ag-gemm", world, self.seq, inter, self.hidden),
        ]


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    var = x.float().pow(2).mean(-1, keepdim=True)
    return (x.float() * torch.rsqrt(var + eps)).to(x.dtype) * weight


def rotary(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Rotary embeddings over the last dimension of ``x`` ``[..., seq, head_dim]``."""
    d = x.shape[-1]
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d))
    ang = positions.float()[:, None] * inv[None, :]
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x.float()[..., 0::2], x.float()[..., 1::2]
    out = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)
    return out.to(x.dtype)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: int, kv_heads: int, head_dim: int) -> torch.Tensor:
    """Causal GQA over ``[..., seq, heads·head_dim]`` projections; returns ``[..., seq, heads·head_dim]``."""
    lead = q.shape[:-2]
    seq = q.shape[-2]

    def split(t: torch.Tensor, h: int) -> torch.Tensor:
        return t.unflatten(-1, (h, head_dim)).transpose(-3, -2).reshape(-1, h, seq, head_dim)

    pos = torch.arange(seq, device=q.device)
    qh, kh, vh = rotary(split(q, heads), pos), rotary(split(k, kv_heads), pos), split(v, kv_heads)
    o = F.scaled_dot_product_attention(qh, kh, vh, is_causal=True, enable_gqa=heads != kv_heads)
    return o.transpose(1, 2).reshape(*lead, seq, heads * head_dim)


class DenseBlock(nn.Module):
    """The plain PyTorch block on the whole sequence (the reference)."""

    def __init__(self, c: Config, device: str = "cuda", dtype: torch.dtype = torch.bfloat16, seed: int = 0) -> None:
        super().__init__()
        g = torch.Generator(device="cpu").manual_seed(seed)

        def w(*shape: int) -> nn.Parameter:
            return nn.Parameter((torch.randn(*shape, generator=g) / math.sqrt(shape[-1])).to(device=device, dtype=dtype))

        self.c = c
        self.q, self.k, self.v = (
            w(c.heads * c.head_dim, c.hidden),
            w(c.kv_heads * c.head_dim, c.hidden),
            w(c.kv_heads * c.head_dim, c.hidden),
        )
        self.o = w(c.hidden, c.heads * c.head_dim)
        self.gate, self.up, self.down = w(c.intermediate, c.hidden), w(c.intermediate, c.hidden), w(c.hidden, c.intermediate)
        self.norm1 = nn.Parameter((1 + 0.1 * torch.randn(c.hidden, generator=g)).to(device=device, dtype=dtype))
        self.norm2 = nn.Parameter((1 + 0.1 * torch.randn(c.hidden, generator=g)).to(device=device, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.c
        h = rms_norm(x, self.norm1, c.eps)
        a = attention(h @ self.q.t(), h @ self.k.t(), h @ self.v.t(), c.heads, c.kv_heads, c.head_dim)
        x = x + a @ self.o.t()
        h = rms_norm(x, self.norm2, c.eps)
        return x + (F.silu(h @ self.gate.t()) * (h @ self.up.t())) @ self.down.t()


class TensorParallelBlock(nn.Module):
    """The block over ``group``, sequence-parallel in and out, from a :class:`DenseBlock`'s weights."""

    def __init__(self, dense: DenseBlock, group: Group) -> None:
        super().__init__()
        c, world = dense.c, group.world
        if c.heads % world or c.kv_heads % world:
            raise ValueError(f"{c.heads} query and {c.kv_heads} key/value heads do not split over {world} ranks")
        self.c, self.group = c, group
        self.q_local, self.kv_local = c.heads // world, c.kv_heads // world
        ranks = range(world) if group.stacked else [group.rank]  # type: ignore[union-attr]
        d = c.head_dim
        qkv, o = [], []
        with torch.no_grad():
            for r in ranks:
                qr = slice(r * self.q_local * d, (r + 1) * self.q_local * d)
                kr = slice(r * self.kv_local * d, (r + 1) * self.kv_local * d)
                qkv.append(torch.cat([dense.q[qr].t(), dense.k[kr].t(), dense.v[kr].t()], dim=1))
                o.append(dense.o[:, qr].t())
        stack = (lambda ts: torch.stack(ts).contiguous()) if group.stacked else (lambda ts: ts[0].contiguous())
        self.qkv = nn.Parameter(stack(qkv))
        self.o = nn.Parameter(stack(o))
        self.norm1, self.norm2 = nn.Parameter(dense.norm1.detach().clone()), nn.Parameter(dense.norm2.detach().clone())
        self.mlp = TensorParallelMLP.from_dense(dense.gate.detach(), dense.up.detach(), dense.down.detach(), group)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: this rank's ``seq / world`` rows ``[rows, hidden]`` (``[world, rows, hidden]`` on one GPU)."""
        c, d = self.c, self.c.head_dim
        h = rms_norm(x, self.norm1, c.eps)
        qkv = ops.all_gather_matmul(h, self.qkv, self.group)  # [.., seq, (q + 2 kv) · d]
        q, k, v = qkv.split([self.q_local * d, self.kv_local * d, self.kv_local * d], dim=-1)
        a = attention(q, k, v, self.q_local, self.kv_local, d).contiguous()
        x = x + ops.matmul_reduce_scatter(a, self.o, self.group)
        h = rms_norm(x, self.norm2, c.eps)
        return x + self.mlp(h)


def _rel(got: torch.Tensor, want: torch.Tensor) -> float:
    return ((got.float() - want.float()).norm() / want.float().norm()).item()


def check(world: int, group: Group, c: Config, steps: int = 3, train: bool = False) -> float:
    """Run the TP block on fresh inputs ``steps`` times and return the worst relative error against the dense
    block; ``train``: also one backward step, the gradient of the input and of the norms' weights compared."""
    dense = DenseBlock(c)
    tp = TensorParallelBlock(dense, group)
    rows = c.seq // world
    mine = slice(None) if group.stacked else slice(group.rank * rows, (group.rank + 1) * rows)  # type: ignore[union-attr]

    def shard(t: torch.Tensor) -> torch.Tensor:
        """This process's rows of ``t`` ``[seq, hidden]`` (every rank's, stacked, in the one-GPU mode)."""
        return t.view(world, rows, c.hidden).contiguous() if group.stacked else t[mine].contiguous()

    worst = 0.0
    for step in range(steps):
        g = torch.Generator(device="cuda").manual_seed(100 + step)
        x = torch.randn(c.seq, c.hidden, device="cuda", dtype=torch.bfloat16, generator=g)
        with torch.no_grad():
            want = dense(x)[mine]
            got = tp(shard(x)).reshape(want.shape)
        ops.synchronize(group)
        worst = max(worst, _rel(got, want))
    if train:
        # Every rank's loss reads its own rows with its own slice of one cotangent; their sum is the dense loss.
        g = torch.Generator(device="cuda").manual_seed(200)
        x = torch.randn(c.seq, c.hidden, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_(True)
        cot = torch.randn(c.seq, c.hidden, device="cuda", generator=g)
        (dense(x).float() * cot).sum().backward()
        xs = shard(x.detach()).requires_grad_(True)
        (tp(xs).float() * shard(cot)).sum().backward()
        ops.synchronize(group)
        worst = max(worst, _rel(xs.grad.reshape(-1, c.hidden), x.grad[mine]))
        for ours, theirs in ((tp.norm1, dense.norm1), (tp.norm2, dense.norm2)):
            grad = ours.grad
            if not group.stacked:  # each rank's copy holds its own rows' share
                import torch.distributed as dist

                dist.all_reduce(grad, group=group.pg)  # type: ignore[union-attr]
            worst = max(worst, _rel(grad, theirs.grad))
    return worst


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world", type=int, nargs="+", default=[8], help="ranks, one or more worlds (one-GPU mode and --prepare)")
    ap.add_argument("--prepare", metavar="DIR", help="compile the kernels the block needs into DIR and exit (needs ovl's CLI)")
    ap.add_argument("--torchrun", action="store_true", help="one rank per process under torchrun")
    ap.add_argument(
        "--train", action="store_true", help="also check one backward step against the dense block's (and --prepare its kernels)"
    )
    ap.add_argument("--tolerance", type=float, default=0.03, help="largest relative error accepted")
    args = ap.parse_args(argv)
    c = Config()
    if args.prepare:
        into = Path(args.prepare)
        for w in args.world:
            for key in c.keys(w, train=args.train):
                print(ensure_compiled(key, into))
        return 0
    if args.torchrun:
        import torch.distributed as dist

        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local))
        groups: list[Group] = [DistGroup.of(dist.group.WORLD)]
    else:
        groups = [OneGpuGroup(w) for w in args.world]
    ok = True
    for group in groups:
        err = check(group.world, group, c, train=args.train)
        ok = ok and err <= args.tolerance
        print(
            f"tp block{', trained one step' if args.train else ''}, {group.world} ranks ({group.kind}): max relative error {err:.4f} vs the dense block — {'ok' if err <= args.tolerance else 'FAILED'}"
        )
        ops.close_all()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
