"""What ``parallel_llama.py`` and ``parallel_mixtral.py`` share: build a ``transformers`` decoder from a config
(random weights, bf16, on the GPU), make it tensor-parallel with ``ovl_runtime.models.parallelize``, and run a
prefill (checked against the dense model), greedy decode steps on the KV cache (the tokens checked against the
dense model's greedy ones), and a training step (forward, backward, AdamW) — on one GPU with every rank in this
process (``OneGpuGroup``: a correctness run, its times are not performance figures) or under torchrun.

    # 1. Compile the kernels it needs (on a machine with Node and ovl's CLI) into a library:
    OVL_CLI="node packages/cli/dist/bin.js" python examples/parallel_llama.py --prepare kernels/ --world 8
    # 2. One GPU, every rank in this process:
    OVL_KERNELS=kernels/ python examples/parallel_llama.py --world 8
    # 3. Under torchrun, one rank per GPU:
    OVL_KERNELS=kernels/ torchrun --nproc_per_node=8 examples/parallel_llama.py --torchrun
    # Without a GPU: a tiny config, every rank emulated on the CPU in float32 (the CLI compiles the kernels):
    OVL_CLI="node packages/cli/dist/bin.js" python examples/parallel_llama.py --emulate --tiny --seq 21 --batch 1
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch


def parse(doc: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--world", type=int, default=2, help="ranks of the one-GPU group (ignored under --torchrun)")
    p.add_argument("--torchrun", action="store_true", help="one rank per process (NCCL process group)")
    p.add_argument("--prepare", type=Path, metavar="DIR", help="compile the kernels this run needs into DIR and exit")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=500, help="prefill length (any: rows are padded to a multiple of the world)")
    p.add_argument("--decode-steps", type=int, default=8)
    p.add_argument("--emulate", action="store_true", help="an EmulatedGroup on the CPU, float32 (no GPU)")
    p.add_argument("--tiny", action="store_true", help="hidden 64, 4 heads, vocabulary 256: for --emulate")
    return p.parse_args()


def run(doc: str, make: Callable[[int, bool], Any]) -> None:
    """``make(layers, tiny)`` builds the dense model (on the current device)."""
    args = parse(doc)
    from ovl_runtime import ops
    from ovl_runtime._kernels.library import ensure_compiled
    from ovl_runtime.groups import EmulatedGroup, OneGpuGroup
    from ovl_runtime.models import kernel_keys, parallelize

    if args.prepare is not None:
        with torch.device("meta"):
            model = make(args.layers, args.tiny)
        for training in (False, True):
            for key in kernel_keys(model, args.world, [args.batch * args.seq], training=training):
                print(ensure_compiled(key, args.prepare))
        return
    rank = 0
    if args.torchrun:
        import torch.distributed as dist

        dist.init_process_group("nccl")
        rank = dist.get_rank()
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
        group: Any = dist.group.WORLD
        world = dist.get_world_size()
    else:
        world = args.world
        group = EmulatedGroup(world) if args.emulate else OneGpuGroup(world)
    say = print if rank == 0 else (lambda *a, **k: None)
    device, dtype = ("cpu", torch.float32) if args.emulate else ("cuda", torch.bfloat16)
    torch.manual_seed(0)  # the same weights and ids on every rank
    with torch.device(device):
        dense = make(args.layers, args.tiny).to(dtype)
    tp = parallelize(dense, group)
    vocab = dense.config.vocab_size
    ids = torch.randint(0, vocab, (args.batch, args.seq), device=device)
    say(f"{type(dense).__name__}: {args.layers} layers, world {world}, batch {args.batch} x {args.seq} tokens")

    with torch.no_grad():
        want = dense(ids).logits.float()
        t0 = time.perf_counter()
        got = tp(ids).float()
        ops.synchronize()
        say(f"prefill: {time.perf_counter() - t0:.3f} s (first call: compiles/loads), rel error vs dense {rel(got, want):.2e}")
        tokens = tp.generate(ids, args.decode_steps)
        seq, ref = ids, []
        for _ in range(args.decode_steps):
            nxt = dense(seq).logits[:, -1].argmax(-1, keepdim=True)
            ref.append(nxt)
            seq = torch.cat([seq, nxt], dim=1)
        same = (tokens == torch.cat(ref, dim=1)).float().mean().item()
        say(f"decode: {args.decode_steps} greedy steps, {same:.0%} of the tokens equal the dense model's (bf16 ties may differ)")

    opt = torch.optim.AdamW(tp.parameters(), lr=1e-4)
    targets = torch.randint(0, vocab, (args.batch, args.seq), device=device)
    for step in range(2):
        loss = torch.nn.functional.cross_entropy(tp(ids).float().reshape(-1, vocab), targets.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        say(f"training step {step}: loss {loss.item():.4f}")
    ops.synchronize()
    if args.torchrun:
        import torch.distributed as dist

        dist.destroy_process_group()


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).norm() / b.norm()).item()
