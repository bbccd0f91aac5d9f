"""``ovl_runtime.models.parallelize`` end to end on the CPU: tiny ``transformers`` decoders (random weights, built
from configs) split over an ``EmulatedGroup`` of 2 ranks, every ovl operator running its compiled manifest through
the CPU emulation in float32, compared with the dense model: prefill logits at lengths that are not powers of two
(nor multiples of the world), gradients after one backward, an optimizer step, decode steps on the KV cache against
transformers' own cache, and the refusals (before anything is sharded, the caller's model untouched).

The kernels are compiled by ovl's CLI into a cache of this module's own; the shapes are chosen so that every model
here shares most of them (hidden 64, 4 heads of 16, 2 kv heads, intermediate 128, vocabulary 256, 24 padded tokens).
"""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from ovl_runtime import ops  # noqa: E402
from ovl_runtime._torch_api import registry  # noqa: E402
from ovl_runtime.errors import UsageError  # noqa: E402
from ovl_runtime.groups import EmulatedGroup, OneGpuGroup  # noqa: E402
from ovl_runtime.models import kernel_keys, parallelize  # noqa: E402

CLI = Path(__file__).resolve().parents[2] / "cli" / "dist" / "bin.js"
pytestmark = pytest.mark.skipif(shutil.which("node") is None or not CLI.is_file(), reason="needs node and the built ovl CLI")

SIZES = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=256)
SIZES["max_position_embeddings"] = 64


@pytest.fixture(scope="module", autouse=True)
def kernels(tmp_path_factory):
    """The CLI compiles every shape once into this module's cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OVL_CLI", f"node {CLI}")
        mp.setenv("OVL_CACHE_DIR", str(tmp_path_factory.mktemp("kernels")))
        mp.setenv("OVL_KERNELS", "")
        mp.delenv("OVL_TARGET", raising=False)
        yield
    ops.close_all()


def build(arch: str, seed: int = 0, **extra):
    torch.manual_seed(seed)
    t = transformers
    if arch == "llama":
        model = t.LlamaForCausalLM(t.LlamaConfig(**SIZES, **extra))
    elif arch == "llama-bias":  # biases on every projection: q/k/v and gate/up sharded, o and down replicated
        model = t.LlamaForCausalLM(t.LlamaConfig(**SIZES, attention_bias=True, mlp_bias=True, **extra))
        with torch.no_grad():  # transformers starts biases at zero: make them count
            for name, p in model.named_parameters():
                if name.endswith(".bias"):
                    p.normal_(0.0, 0.1)
    elif arch == "qwen2":  # q/k/v biases, the output projection tied to the embedding
        model = t.Qwen2ForCausalLM(t.Qwen2Config(**SIZES, tie_word_embeddings=True, **extra))
    elif arch == "mistral":  # a sliding window shorter than the sequences
        model = t.MistralForCausalLM(t.MistralConfig(**SIZES, sliding_window=8, **extra))
    else:
        model = t.MixtralForCausalLM(t.MixtralConfig(**SIZES, num_local_experts=4, num_experts_per_tok=2, **extra))
    return model.float()


def rel(got, want) -> float:
    return ((got.double() - want.double()).norm() / want.double().norm()).item()


def ids(*shape: int, seed: int = 1):
    return torch.randint(0, SIZES["vocab_size"], shape, generator=torch.Generator().manual_seed(seed))


def bound_keys(g) -> set[str]:
    return {dirname for (dirname, name), op in registry._operators.items() if name == g.name and not op.closed}


@pytest.mark.parametrize("arch", ["llama", "llama-bias", "mixtral"])
def test_prefill_gradients_and_a_training_step_match_the_dense_model(arch):
    dense = build(arch)
    g = EmulatedGroup(2)
    tp = parallelize(dense, g)
    x = ids(1, 23)  # 23 tokens: padded to 24 rows, 12 per rank
    want = dense(x).logits
    got = tp(x)
    assert got.shape == (1, 23, 256) and rel(got, want) < 1e-5
    target = ids(1, 23, seed=2)
    loss_d = torch.nn.functional.cross_entropy(want.reshape(-1, 256), target.reshape(-1))
    loss_p = torch.nn.functional.cross_entropy(got.reshape(-1, 256), target.reshape(-1))
    loss_d.backward()
    loss_p.backward()
    expected = tp.shard_dense({n: p.grad for n, p in dense.named_parameters(remove_duplicate=False)})
    names = [n for n, _ in tp.named_parameters()]
    assert sorted(names) == sorted(expected)
    for n, p in tp.named_parameters():
        assert p.grad is not None and rel(p.grad, expected[n]) < 1e-4, n
    # One optimizer step on each: the parallel parameters stay the dense ones, cut.
    for model in (dense, tp):
        torch.optim.SGD(model.parameters(), lr=0.5).step()
    after = tp.shard_dense(dict(dense.named_parameters(remove_duplicate=False)))
    for n, p in tp.named_parameters():
        assert rel(p.detach(), after[n].detach()) < 1e-5, n
    # The operators bound are exactly those kernel_keys lists for a training prefill of 23 tokens.
    assert bound_keys(g) == {k.dirname for k in kernel_keys(dense, 2, [23], training=True)}


@pytest.mark.parametrize("arch", ["llama", "llama-bias", "qwen2", "mistral", "mixtral"])
def test_batched_prefill_and_decode_steps_match_transformers_cache(arch):
    dense = build(arch, seed=3).eval()
    g = EmulatedGroup(2)
    tp = parallelize(dense, g)
    x = ids(2, 12, seed=4)  # two sequences of 12: 24 rows
    with torch.no_grad():
        out = dense(x, use_cache=True)
        logits, cache = tp.prefill(x)
        assert rel(logits, out.logits) < 1e-5 and cache.length == 12
        past, nxt = out.past_key_values, out.logits[:, -1].argmax(-1)
        for step in range(3):  # past the sliding window of 8 for mistral
            ref = dense(nxt[:, None], past_key_values=past, use_cache=True)
            logits, cache = tp.decode(nxt, cache)
            assert logits.shape == (2, 1, 256) and rel(logits, ref.logits) < 1e-5, step
            past, nxt = ref.past_key_values, ref.logits[:, -1].argmax(-1)
    assert cache.length == 15
    # Greedy generation continues exactly as the dense model's.
    with torch.no_grad():
        seq, tokens = x[:1], []
        for _ in range(3):
            nxt = dense(seq).logits[:, -1].argmax(-1, keepdim=True)
            tokens.append(nxt)
            seq = torch.cat([seq, nxt], dim=1)
    assert torch.equal(tp.generate(x[:1], 3), torch.cat(tokens, dim=1))


def test_without_sequence_parallelism_the_row_parallel_halves_run_gemm_all_reduce():
    dense = build("llama", seed=5)
    g = EmulatedGroup(2)
    tp = parallelize(dense, g, sequence_parallel=False)
    x = ids(1, 13, seed=6)
    want, got = dense(x).logits, tp(x)
    assert rel(got, want) < 1e-5
    want.square().mean().backward()
    got.square().mean().backward()
    expected = tp.shard_dense({n: p.grad for n, p in dense.named_parameters()})
    for n, p in tp.named_parameters():
        assert rel(p.grad, expected[n]) < 1e-4, n
    assert bound_keys(g) == {k.dirname for k in kernel_keys(dense, 2, [13], sequence_parallel=False)}
    assert all(k.startswith("gemm-ar") for k in bound_keys(g))


def test_the_interpreter_engine_runs_the_emitted_source():
    dense = build("llama", seed=7).eval()
    tp = parallelize(dense, EmulatedGroup(2, engine="interpret"))
    x = ids(1, 23, seed=8)
    with torch.no_grad():
        assert rel(tp(x), dense(x).logits) < 3e-2  # the interpreter computes in the kernels' bf16


def snapshot(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def unchanged(model, before) -> bool:
    after = model.state_dict()
    return after.keys() == before.keys() and all(torch.equal(after[k], before[k]) for k in before)


@pytest.mark.parametrize(
    ("make", "world", "group", "message"),
    [
        (lambda: build("llama"), 3, "emulated", r"model\.layers\.0\.self_attn: attention heads \(4\) do not split over 3 ranks"),
        (lambda: build("llama"), 4, "emulated", r"model\.layers\.1\.self_attn: kv heads \(2\) do not split over 4 ranks"),
        (lambda: build("llama", hidden_act="gelu"), 2, "emulated", r"model\.layers\.0\.mlp: activation 'gelu'"),
        (lambda: build("llama").double(), 2, "emulated", r"LlamaForCausalLM: parameters are \['torch.float64'\]"),
        (lambda: build("llama"), 2, "one-gpu", r"parameters are \['torch.float32'\]; this group runs one of torch.bfloat16"),
        (lambda: build("llama", attention_dropout=0.1), 2, "emulated", r"self_attn: attention dropout"),
        (lambda: build("mixtral", router_jitter_noise=0.1), 2, "emulated", r"model\.layers\.0\.mlp: router jitter noise"),
    ],
)
def test_refusals_name_the_module_and_leave_the_model_alone(make, world, group, message):
    model = make()
    before = snapshot(model)
    g = EmulatedGroup(world) if group == "emulated" else OneGpuGroup(world)
    with pytest.raises(UsageError, match=message):
        parallelize(model, g)
    assert unchanged(model, before)


def test_an_unknown_module_or_model_is_refused_by_name():
    model = build("llama")
    model.model.layers[1].mlp = torch.nn.Sequential(torch.nn.Linear(64, 64))
    model.model.layers[0].self_attn.q_norm = torch.nn.LayerNorm(16)
    before = snapshot(model)
    with pytest.raises(UsageError) as err:
        parallelize(model, EmulatedGroup(2))
    assert "model.layers.1.mlp: Sequential is not an MLP ovl parallelizes" in str(err.value)
    assert "model.layers.0.self_attn: submodules ['q_norm'] beside q/k/v/o_proj" in str(err.value)
    assert unchanged(model, before)
    base = copy.deepcopy(build("llama").model)  # the decoder without its output projection
    with pytest.raises(UsageError, match="LlamaModel is not a decoder ovl parallelizes"):
        parallelize(base, EmulatedGroup(2))


def test_the_emulated_group_runs_operators_on_cpu_tensors_and_the_gpu_groups_refuse_them():
    g = EmulatedGroup(2)
    x, w = torch.randn(2, 12, 64), torch.randn(2, 64, 64)
    assert rel(ops.all_gather_matmul(x, w, g), torch.cat(list(x)) @ w) < 1e-6
    h, w2 = torch.randn(2, 24, 64), torch.randn(2, 64, 64)
    assert rel(ops.matmul_reduce_scatter(h, w2, g), (h @ w2).sum(0).reshape(2, 12, 64)) < 1e-6
    bf = ops.all_gather_matmul(x.bfloat16(), w.bfloat16(), g)
    assert bf.dtype == torch.bfloat16 and rel(bf, torch.cat(list(x)) @ w) < 2e-2
    with pytest.raises(UsageError, match="the operators run on CUDA tensors"):
        ops.all_gather_matmul(x.bfloat16(), w.bfloat16(), OneGpuGroup(2))
    with pytest.raises(UsageError, match="x is torch.float64"):
        ops.all_gather_matmul(x.double(), w.double(), g)
    with pytest.raises(UsageError, match="engine numpy or interpret"):
        EmulatedGroup(2, engine="gpu")
