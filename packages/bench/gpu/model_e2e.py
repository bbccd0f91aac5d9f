"""Whole models end to end: a ``transformers`` decoder made tensor-parallel by ``ovl_runtime.models.parallelize``
beside PyTorch's own tensor parallelism, at world N under torchrun, all in one run: tokens/s of prefills (several
lengths, not only powers of two), of decode steps on the KV cache, and of training steps (forward, backward,
AdamW), written as JSON and a short table.

Variants (``--variants``; each one that fails to build or run is recorded with its error, the others go on):

- ``ovl``: ``parallelize(model, group)``: sequence-parallel rows, AllGather+GEMM / GEMM+ReduceScatter / the fused
  MLP chain / the MoE operators; decode steps replicated, plain GEMMs and NCCL sums.
- ``torch``: the same model under DTensor ``parallelize_module`` (``ColwiseParallel`` q/k/v/gate/up,
  ``RowwiseParallel`` o/down, ``SequenceParallel`` norms, vocabulary-parallel embedding and lm_head; NCCL), eager.
  Decode steps run a second copy under the plan without sequence parallelism (one token cannot be split).
- ``torch-compile``: that forward under ``torch.compile``; ``async-tp``: under ``torch.compile`` with
  ``_micro_pipeline_tp`` (PyTorch's async-TP: AllGather/ReduceScatter matmuls fused over symmetric memory).
  Decode steps of the compiled variants are not measured (a growing KV cache recompiles).

The torch variants run dense models only (LLaMA-style): transformers 5's fused expert tensors have no layout under
PyTorch's TP styles. Times are CUDA-event medians of ``--reps`` runs after ``--warmup``, each after a barrier, the
slowest rank's median (``baselines.py``'s timer). Each variant's prefill logits are checked against the dense model
(relative error in the JSON).

    # kernels, on a machine with ovl's CLI (the same --model/--layers/--prefill/--train-seq as the run):
    OVL_CLI="node packages/cli/dist/bin.js" python packages/bench/gpu/model_e2e.py --prepare kernels/ --world 8
    # world 8, one rank per GPU:
    OVL_KERNELS=kernels/ torchrun --nproc_per_node=8 packages/bench/gpu/model_e2e.py --out e2e-w8.json
    # one GPU, every rank in one process (ovl and the dense model only): a correctness run, NOT speed figures
    OVL_KERNELS=kernels/ python packages/bench/gpu/model_e2e.py --one-gpu --world 8 --out e2e-onegpu.json
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

# NVLink multicast can take a shared host's GPUs down: never use it.
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from ovl_runtime import ops  # noqa: E402 - sets CUDA_DEVICE_MAX_CONNECTIONS before CUDA starts


def config(kind: str, layers: int) -> Any:
    import transformers as t

    common = dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8, num_hidden_layers=layers)
    if kind == "llama":  # LLaMA-3-8B-shaped
        return t.LlamaConfig(**common, vocab_size=128256, rope_theta=500000.0, max_position_embeddings=16384)
    return t.MixtralConfig(**common, vocab_size=32000, num_local_experts=8, num_experts_per_tok=2, max_position_embeddings=16384)


def build(kind: str, layers: int, device: str) -> Any:
    import transformers as t

    cls = t.LlamaForCausalLM if kind == "llama" else t.MixtralForCausalLM
    torch.manual_seed(0)  # the same weights on every rank
    with torch.device(device):
        model = cls(config(kind, layers))
    return model.to(torch.bfloat16) if device != "meta" else model


# ---- timing ----
def timed(fn: Any, warmup: int, reps: int, distributed: bool, before: Any = None) -> float:
    """Median ms of ``fn()`` over ``reps`` runs after ``warmup``; ``before()`` (untimed) precedes each run; under
    torchrun each run starts after a barrier and the slowest rank's median is returned."""
    for _ in range(warmup):
        if before is not None:
            before()
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        if before is not None:
            before()
        if distributed:
            dist.barrier()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    med = statistics.median(times)
    if distributed:
        t = torch.tensor([med], device="cuda")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        med = float(t.item())
    return med


def rel(a: Any, b: Any) -> float:
    return float((a.float() - b.float()).norm() / b.float().norm())


# ---- PyTorch's tensor parallelism over the transformers modules ----
def torch_tp(model: Any, mesh: Any, sequence_parallel: bool) -> Any:
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, PrepareModuleInput, RowwiseParallel, SequenceParallel, parallelize_module

    if sequence_parallel:
        top = {
            "model.embed_tokens": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
            "model.norm": SequenceParallel(),
            "lm_head": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate()),
        }
        layer_plan: dict[str, Any] = {
            "input_layernorm": SequenceParallel(),
            "self_attn": PrepareModuleInput(
                input_kwarg_layouts={"hidden_states": Shard(1)}, desired_input_kwarg_layouts={"hidden_states": Replicate()}
            ),
            "self_attn.o_proj": RowwiseParallel(output_layouts=Shard(1)),
            "post_attention_layernorm": SequenceParallel(),
            "mlp": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
            "mlp.down_proj": RowwiseParallel(output_layouts=Shard(1)),
        }
    else:
        top = {"model.embed_tokens": RowwiseParallel(input_layouts=Replicate()), "lm_head": ColwiseParallel(output_layouts=Replicate())}
        layer_plan = {"self_attn.o_proj": RowwiseParallel(), "mlp.down_proj": RowwiseParallel()}
    for name in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj"):
        layer_plan[name] = ColwiseParallel()
    parallelize_module(model, mesh, top)
    for layer in model.model.layers:
        parallelize_module(layer, mesh, layer_plan)
    return model


def hf_forward(model: Any, ids: Any, cache: Any = None) -> Any:
    """The decoder's forward over its own modules (positions and rotary embedding of the whole sequence, causal
    SDPA without a mask), so that sequence-sharded hidden states pass between the TP-planned layers."""
    past = cache.get_seq_length() if cache is not None else 0
    pos = torch.arange(past, past + ids.shape[1], device=ids.device).unsqueeze(0)
    x = model.model.embed_tokens(ids)
    rope = model.model.rotary_emb(x, pos)
    for layer in model.model.layers:
        x = layer(x, attention_mask=None, position_ids=pos, past_key_values=cache, use_cache=cache is not None, position_embeddings=rope)
    return model.lm_head(model.model.norm(x))


# ---- one variant ----
def loss_of(logits: Any, targets: Any) -> Any:
    return torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))


def measure(name: str, forward: Any, params: list[Any], args: argparse.Namespace, vocab: int, decode: Any, check: Any) -> dict[str, Any]:
    """Prefill at every length, training steps, and (``decode``: a function of the steps' ids) decode steps."""
    out: dict[str, Any] = {"variant": name, "prefill": {}, "errors": {}}
    distributed = not args.one_gpu
    gen = torch.Generator(device="cuda").manual_seed(1)
    for n in args.prefill:
        ids = torch.randint(0, vocab, (1, n), device="cuda", generator=gen)
        try:
            with torch.no_grad():
                if check is not None and n == args.prefill[0]:
                    out["prefill_rel_error_vs_dense"] = rel(forward(ids), check(ids))
                ms = timed(lambda ids=ids: forward(ids), args.warmup, args.reps, distributed)
            out["prefill"][str(n)] = {"ms": ms, "tokens_per_s": n / ms * 1e3}
        except Exception as exc:  # noqa: BLE001 - recorded; the other measurements go on
            out["errors"][f"prefill {n}"] = f"{type(exc).__name__}: {exc}"[:2000]
    ids = torch.randint(0, vocab, (1, args.train_seq), device="cuda", generator=gen)
    targets = torch.randint(0, vocab, (1, args.train_seq), device="cuda", generator=gen)
    opt = torch.optim.AdamW(params, lr=1e-5)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss_of(forward(ids), targets).backward()
        opt.step()

    try:
        ms = timed(step, args.warmup, args.reps, distributed)
        out["train"] = {"seq": args.train_seq, "ms": ms, "tokens_per_s": args.train_seq / ms * 1e3}
    except Exception as exc:  # noqa: BLE001
        out["errors"]["train"] = f"{type(exc).__name__}: {exc}"[:2000]
    opt.state.clear()  # free the moments before the decode measurement
    if decode is not None:
        try:
            ms = decode()
            tokens = args.decode_batch * args.decode_steps
            out["decode"] = {"batch": args.decode_batch, "context": args.decode_context, "steps": args.decode_steps}
            out["decode"].update({"ms_per_step": ms / args.decode_steps, "tokens_per_s": tokens / ms * 1e3})
        except Exception as exc:  # noqa: BLE001
            out["errors"]["decode"] = f"{type(exc).__name__}: {exc}"[:2000]
    return out


def ovl_decode(tp: Any, args: argparse.Namespace, vocab: int) -> Any:
    gen = torch.Generator(device="cuda").manual_seed(2)
    ctx = torch.randint(0, vocab, (args.decode_batch, args.decode_context), device="cuda", generator=gen)
    nxt = torch.randint(0, vocab, (args.decode_batch,), device="cuda", generator=gen)
    with torch.no_grad():
        _, cache = tp.prefill(ctx)

    def steps() -> None:
        c = cache  # decode returns a longer cache and leaves this one as it is
        for _ in range(args.decode_steps):
            _, c = tp.decode(nxt, c)

    return lambda: timed(steps, args.warmup, args.reps, not args.one_gpu)


def torch_decode(model: Any, args: argparse.Namespace, vocab: int) -> Any:
    from transformers import DynamicCache

    gen = torch.Generator(device="cuda").manual_seed(2)
    ctx = torch.randint(0, vocab, (args.decode_batch, args.decode_context), device="cuda", generator=gen)
    nxt = torch.randint(0, vocab, (args.decode_batch, 1), device="cuda", generator=gen)
    base = DynamicCache(config=model.config)
    with torch.no_grad():
        hf_forward(model, ctx, base)
    state: dict[str, Any] = {}

    def fresh() -> None:
        state["cache"] = copy.deepcopy(base)

    def steps() -> None:
        with torch.no_grad():
            for _ in range(args.decode_steps):
                hf_forward(model, nxt, state["cache"])

    return lambda: timed(steps, args.warmup, args.reps, not args.one_gpu, before=fresh)


# ---- the run ----
def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=["llama", "mixtral"], default="llama")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--prefill", type=lambda s: [int(x) for x in s.split(",")], default=[1000, 3000, 4096, 8000])
    p.add_argument("--train-seq", type=int, default=4000)
    p.add_argument("--decode-batch", type=int, default=8)
    p.add_argument("--decode-context", type=int, default=1000)
    p.add_argument("--decode-steps", type=int, default=16)
    p.add_argument("--variants", type=lambda s: s.split(","), default=["ovl", "torch", "torch-compile", "async-tp"])
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--one-gpu", action="store_true", help="every rank in this process on one GPU (ovl and dense only; not speed)")
    p.add_argument("--world", type=int, default=8, help="the world of --one-gpu and --prepare")
    p.add_argument("--prepare", type=Path, metavar="DIR", help="compile ovl's kernels for this run into DIR and exit")
    p.add_argument("--out", type=Path, default=Path("model-e2e.json"))
    return p.parse_args()


def prepare(args: argparse.Namespace) -> None:
    from ovl_runtime._kernels.library import ensure_compiled
    from ovl_runtime.models import kernel_keys

    model = build(args.model, args.layers, "meta")
    keys = {k.dirname: k for k in kernel_keys(model, args.world, args.prefill)}
    keys.update({k.dirname: k for k in kernel_keys(model, args.world, [args.train_seq], training=True)})
    for key in keys.values():
        print(ensure_compiled(key, args.prepare), flush=True)


def table(result: dict[str, Any]) -> str:
    lengths = result["prefill_lengths"]
    head = ["variant", *[f"prefill {n}" for n in lengths], f"train {result['train_seq']}", "decode"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for v in result["variants"]:
        cells = [v["variant"]]
        cells += [f"{v['prefill'][str(n)]['tokens_per_s']:,.0f}" if str(n) in v["prefill"] else "—" for n in lengths]
        cells.append(f"{v['train']['tokens_per_s']:,.0f}" if "train" in v else "—")
        cells.append(f"{v['decode']['tokens_per_s']:,.0f}" if "decode" in v else "—")
        rows.append("| " + " | ".join(cells) + " |")
    note = "tokens/s (prefill and train: batch 1; decode: batch x steps / time)."
    if result["mode"] == "one-gpu":
        note += " ONE-GPU MODE: every rank shares one GPU; a correctness run, NOT speed figures."
    return "\n".join([*rows, "", note])


def main() -> None:
    args = parse()
    if args.prepare is not None:
        prepare(args)
        return
    from ovl_runtime.groups import OneGpuGroup
    from ovl_runtime.models import parallelize

    if args.one_gpu:
        rank, world, group = 0, args.world, OneGpuGroup(args.world)
    else:
        dist.init_process_group("nccl")
        rank, world = dist.get_rank(), dist.get_world_size()
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
        group = dist.group.WORLD
    dense = build(args.model, args.layers, "cuda")
    vocab = dense.config.vocab_size

    def check(ids: Any) -> Any:
        return dense(ids).logits

    result: dict[str, Any] = {
        "mode": "one-gpu" if args.one_gpu else "torchrun",
        "speed_figures": not args.one_gpu,
        "device": torch.cuda.get_device_name(),
        "world": world,
        "model": args.model,
        "config": config(args.model, args.layers).to_dict(),
        "prefill_lengths": args.prefill,
        "train_seq": args.train_seq,
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "variants": [],
    }
    mesh = None
    for name in args.variants:
        if name != "ovl" and (args.one_gpu or args.model != "llama"):
            result["variants"].append(
                {"variant": name, "prefill": {}, "errors": {"skipped": "the torch variants need torchrun and a dense model"}}
            )
            continue
        try:
            if name == "ovl":
                tp = parallelize(dense, group)
                entry = measure(name, tp, list(tp.parameters()), args, vocab, ovl_decode(tp, args, vocab), check)
                del tp
            else:
                from torch.distributed.device_mesh import init_device_mesh

                mesh = mesh or init_device_mesh("cuda", (world,))
                model = torch_tp(copy.deepcopy(dense), mesh, sequence_parallel=True)
                fwd: Any = lambda ids, m=model: hf_forward(m, ids)  # noqa: E731
                decode = None
                if name == "torch-compile":
                    fwd = torch.compile(fwd)
                elif name == "async-tp":
                    from torch.distributed._symmetric_memory import enable_symm_mem_for_group

                    enable_symm_mem_for_group(dist.group.WORLD.group_name)
                    fwd = torch.compile(fwd, options={"_micro_pipeline_tp": True})
                else:
                    decode = torch_decode(torch_tp(copy.deepcopy(dense), mesh, sequence_parallel=False), args, vocab)
                entry = measure(name, fwd, list(model.parameters()), args, vocab, decode, check)
                del model
        except Exception as exc:  # noqa: BLE001 - recorded; the other variants go on
            entry = {"variant": name, "prefill": {}, "errors": {"build": f"{type(exc).__name__}: {exc}"[:2000]}}
        result["variants"].append(entry)
        ops.close_all(force=True)
        torch.cuda.empty_cache()
        if rank == 0:
            print(json.dumps(entry), flush=True)
    if rank == 0:
        args.out.write_text(json.dumps(result, indent=2))
        args.out.with_suffix(".md").write_text(table(result) + "\n")
        print(table(result))
    if not args.one_gpu:
        dist.destroy_process_group()
    sys.exit(0)


if __name__ == "__main__":
    main()
