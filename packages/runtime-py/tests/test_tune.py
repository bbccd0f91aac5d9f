"""On-device tuning without a GPU: the explicit configuration of a key (its directory name and flags), the cache of
tuned choices (written, read back, keyed, a corrupt file never trusted), the selection rule and the whole tuning
path with injected timings, the refusal during a CUDA graph capture, and the candidates the compiler lists and
compiles into the library (with the built CLI)."""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
from pathlib import Path

import pytest

from ovl_runtime._kernels import library as lib
from ovl_runtime._kernels.compute_config import ComputeConfig, compute_kernel_config
from ovl_runtime._tune import cache as tcache
from ovl_runtime._tune import candidates as tcand
from ovl_runtime._tune import settings as tsettings
from ovl_runtime._tune.select import choose, relative
from ovl_runtime._tune.settings import TuneRefused, TuneSettings
from ovl_runtime.errors import ManifestError, UsageError

CLI = Path(__file__).resolve().parents[2] / "cli" / "dist" / "bin.js"
needs_cli = pytest.mark.skipif(shutil.which("node") is None or not CLI.is_file(), reason="needs node and the built ovl CLI")

FLAT = ComputeConfig("gemm_tma_persistent_flat", 128, 256, 64, 4, 3, 8)
WIDE = ComputeConfig("gemm_tma_persistent", 256, 128, 64, 8, 4, 8)


@pytest.fixture(autouse=True)
def _fresh(monkeypatch, tmp_path):
    monkeypatch.setenv("OVL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OVL_KERNELS", "")
    monkeypatch.delenv("OVL_TUNE", raising=False)
    tsettings.reset()
    yield
    tsettings.reset()


# ---- the key of one configuration ----


def test_relative_times_cancel_a_clock_that_drifts_between_sweeps():
    # cuBLAS and a candidate 10% slower, measured while the GPU's clocks fall from sweep to sweep: each sweep sees
    # both at the same clock, so the candidate is 1.10 of cuBLAS in every one of them.
    clock = [1.0, 1.05, 1.18, 1.17, 1.2, 1.16]
    cublas = [0.5 * c for c in clock]
    slower = [0.55 * c for c in clock]
    assert relative([cublas, slower]) == pytest.approx([1.0, 1.1])
    # A median over separate rounds of each would not: the candidate measured in the slow sweeps alone looks 24% slower.
    assert sum(slower[3:]) / sum(cublas[:3]) > 1.2
    # Halves: the sweeps a slice selects; a member missing a sweep has no relative time; the base must have every one.
    assert relative([cublas, slower, [1.0] * 5], part=slice(3, None)) == [1.0, pytest.approx(1.1), None]
    assert relative([cublas, [0.6] * 3 + [float("nan")] * 3], part=slice(0, 3))[1] == pytest.approx(0.6 / 0.5 / 1.05)
    with pytest.raises(ValueError, match="base"):
        relative([[0.0, 1.0], [1.0, 1.0]])


def test_a_config_names_its_own_directory_and_the_flags_that_compile_it():
    key = lib.KernelKey("ag-gemm", 4, 8192, 2560, 5120, target="h200")
    tuned = dataclasses.replace(key, config=FLAT)
    assert tuned.dirname == f"{key.dirname}-gemm_tma_persistent_flat-128x256x64-g4-s3-w8"
    args = tuned.cli_args(Path("/o"))
    assert args[: len(key.cli_args(Path("/o"))) - 2] == key.cli_args(Path("/o"))[:-2]  # every flag of the key, then its config
    flags = ["--tile", "128x256x64", "--group-m", "4", "--num-warps", "8", "--num-stages", "3", "--body", "gemm_tma_persistent_flat"]
    assert args[-len(flags) - 2 :] == [*flags, "--out", "/o"]
    rows = dataclasses.replace(lib.rows_key("ag-gemm", 4, 2560, 5120), config=FLAT)
    assert rows.dirname.endswith("-rows32768-n2560-k5120-bf16-gemm_tma_persistent_flat-128x256x64-g4-s3-w8")
    assert "--any-rows" in rows.cli_args(Path("/o")) and rows.cli_args(Path("/o"))[-4:-2] == ["--body", "gemm_tma_persistent_flat"]
    assert FLAT.label == "gemm_tma_persistent_flat 128x256x64 g4 s3 w8"
    assert ComputeConfig.from_json(FLAT.to_json()) == FLAT


@pytest.mark.parametrize(
    "bad",
    [
        ("no body", 128, 256, 64, 8, 3, 8),
        ("b", 96, 256, 64, 8, 3, 8),
        ("b", 128, 512, 64, 8, 3, 8),
        ("b", 128, 256, 64, 0, 3, 8),
        ("b", 128, 256, 64, 8, 9, 8),
        ("b", 128, 256, 64, 8, 3, 6),
    ],
)
def test_a_config_refuses_what_no_directory_or_compile_can_name(bad):
    with pytest.raises(UsageError, match="compute config"):
        ComputeConfig(*bad)


def test_only_the_tuned_operators_take_a_config():
    with pytest.raises(UsageError, match="ag-gemm, gemm-rs only"):
        lib.KernelKey("gemm-ar", 2, 512, 128, 64, config=FLAT)
    with pytest.raises(UsageError, match="missing 'groupM'"):
        ComputeConfig.from_json({"body": "b", "BM": 128, "BN": 128, "BK": 64})


# ---- the cache ----
def _record(key: lib.KernelKey, gpu: str = "NVIDIA H200", chosen: ComputeConfig = WIDE, **kw) -> tcache.TuneRecord:
    entry = tcache.entry_key(key, gpu)
    fields = dict(
        entry=entry,
        dirname=dataclasses.replace(key, config=chosen).dirname,
        chosen=chosen,
        table=FLAT,
        table_chosen=chosen == FLAT,
        m=key.m,
        ms=0.9,
        table_ms=1.0,
        cublas_ms=0.88,
        seconds=42.0,
        gpu=gpu,
        when="2026-12-02T00:00:00+0000",
        candidates=(
            tcache.CandidateTime(FLAT, "table", 1.0),
            tcache.CandidateTime(WIDE, "model", 0.9),
            tcache.CandidateTime(FLAT, "model", None, "wrong result"),
        ),
        reason="11.1% faster than the table's pick",
    )
    fields.update(kw)
    return tcache.TuneRecord(**fields)  # type: ignore[arg-type]


def test_the_cache_key_names_everything_a_choice_depends_on():
    key = lib.KernelKey("gemm-rs", 6, 6144, 7168, 3200, target="h200")
    assert tcache.entry_key(key, "NVIDIA H200") == "gemm-rs|w6|m6144|n7168|k3200|bf16|table=h200|gpu=NVIDIA H200"
    rows = lib.rows_key("ag-gemm", 3, 2560, 5120)
    assert tcache.entry_key(rows, "NVIDIA H100 80GB HBM3").startswith(f"ag-gemm|w3|rows<={rows.rows}@{rows.m}|n2560|k5120|bf16|")
    others = [dataclasses.replace(key, world=3), dataclasses.replace(key, n=7169), dataclasses.replace(key, target="h100")]
    assert len({tcache.entry_key(k, "g") for k in [key, *others]}) == 4
    assert tcache.entry_key(key, "g") != tcache.entry_key(key, "h")


def test_records_are_written_and_read_back_and_other_entries_kept(tmp_path):
    assert tcache.cache_path() == tmp_path / "cache" / "tuned.json"
    assert tcache.read_cache() == {}
    a = _record(lib.KernelKey("gemm-rs", 6, 6144, 7168, 3200))
    b = _record(lib.KernelKey("ag-gemm", 3, 24576, 2560, 5120), chosen=FLAT, ms=1.0, table_ms=1.0)
    tcache.write_record(a)
    tcache.write_record(b)
    got = tcache.read_cache()
    assert got == {a.entry: a, b.entry: b} and all(r.origin == "cache" for r in got.values())
    assert got[b.entry].table_chosen and got[a.entry].ratio == pytest.approx(0.88 / 0.9)
    assert got[a.entry].candidates[2].error == "wrong result"
    newer = dataclasses.replace(a, ms=0.8)
    tcache.write_record(newer)
    assert tcache.read_cache()[a.entry].ms == 0.8 and len(tcache.read_cache()) == 2
    assert not [p for p in (tmp_path / "cache").iterdir() if p.name.startswith(".tuned.")]  # no temporary left


@pytest.mark.parametrize(
    "text, why",
    [
        ("{not json", "is not JSON"),
        (json.dumps({"$schema": "ovl.tuned/v0", "entries": {}}), "is not an ovl.tuned/v1 file"),
        (json.dumps([1, 2]), "is not an ovl.tuned/v1 file"),
    ],
)
def test_a_corrupt_cache_file_is_ignored_with_a_warning_and_rewritten(tmp_path, text, why):
    path = tcache.cache_path()
    path.parent.mkdir(parents=True)
    path.write_text(text)
    with pytest.warns(RuntimeWarning, match=why):
        assert tcache.read_cache() == {}
    rec = _record(lib.KernelKey("gemm-rs", 6, 6144, 7168, 3200))
    with pytest.warns(RuntimeWarning):
        tcache.write_record(rec)
    assert tcache.read_cache() == {rec.entry: rec}


def test_a_malformed_entry_is_never_trusted_the_others_are_kept():
    good = _record(lib.KernelKey("gemm-rs", 6, 6144, 7168, 3200))
    bad_time = dict(good.to_json(), ms=-1.0, entry="x")
    misfiled = good.to_json()
    lying = dict(_record(lib.KernelKey("gemm-rs", 5, 5120, 7168, 3200)).to_json(), table_chosen=True)
    path = tcache.cache_path()
    path.parent.mkdir(parents=True)
    entries = {good.entry: good.to_json(), "x": bad_time, "elsewhere": misfiled, lying["entry"]: lying}
    path.write_text(json.dumps({"$schema": tcache.SCHEMA, "entries": entries}))
    with pytest.warns(RuntimeWarning) as seen:
        got = tcache.read_cache()
    assert got == {good.entry: good}
    assert len(seen) == 3 and any("positive number of ms" in str(w.message) for w in seen)


# ---- choosing ----
def test_the_table_pick_stays_unless_another_is_clearly_faster():
    assert choose([1.0, 1.05, 1.2], 0.01).index == 0
    assert choose([1.0, 0.995, 1.2], 0.01).index == 0  # 0.5% faster: noise, the table's pick stays
    c = choose([1.0, 0.97, 0.90, None], 0.01)
    assert c.index == 2 and "11.1% faster" in c.reason
    assert choose([None, 0.97, 0.90], 0.01).index == 2  # the table's pick did not run: the fastest other
    assert choose([1.0, 0.98], 0.0).index == 1
    with pytest.raises(TuneRefused, match="no candidate ran correctly"):
        choose([None, None, float("inf")], 0.01)


def test_settings_come_from_the_environment_and_are_checked(monkeypatch):
    assert not tsettings.current().enabled
    monkeypatch.setenv("OVL_TUNE", "1")
    monkeypatch.setenv("OVL_TUNE_TOP_K", "4")
    tsettings.reset()
    assert tsettings.current() == TuneSettings(enabled=True, top_k=4)
    monkeypatch.setenv("OVL_TUNE_BUDGET_S", "soon")
    tsettings.reset()
    with pytest.raises(TuneRefused, match="OVL_TUNE_BUDGET_S"):
        tsettings.current()
    with pytest.raises(TuneRefused, match="top_k"):
        TuneSettings(top_k=0)


# ---- the candidates document ----
def _doc(key: lib.KernelKey, configs: list[ComputeConfig], sources: list[str] | None = None) -> dict:
    sources = sources or ["table", *["model"] * (len(configs) - 1)]
    return {
        "$schema": tcand.SCHEMA,
        "operator": key.op,
        "problem": {"M": key.m, "N": key.n, "K": key.k, "world": key.world},
        **({"rows": {"max": key.rows}} if key.rows else {}),
        "topK": len(configs),
        "candidates": [
            {"rank": i, "source": s, "config": c.to_json(), "predictedMs": 0.5} for i, (c, s) in enumerate(zip(configs, sources))
        ],
    }


def test_the_table_pick_is_the_key_itself_and_the_others_keys_of_their_own():
    key = lib.rows_key("ag-gemm", 4, 2560, 5120)
    got = tcand.parse_candidates(_doc(key, [FLAT, WIDE]), key, "doc")
    assert [c.key for c in got] == [key, dataclasses.replace(key, config=WIDE)]
    assert [c.source for c in got] == ["table", "model"] and got[0].config == FLAT
    with pytest.raises(UsageError, match="not of"):
        tcand.parse_candidates(_doc(dataclasses.replace(key, n=2561), [FLAT]), key, "doc")
    with pytest.raises(UsageError, match="not of"):
        tcand.parse_candidates(_doc(lib.KernelKey("ag-gemm", 4, key.m, 2560, 5120), [FLAT]), key, "doc")
    with pytest.raises(UsageError, match="the table's pick comes first"):
        tcand.parse_candidates(_doc(key, [FLAT, WIDE], ["model", "table"]), key, "doc")
    with pytest.raises(UsageError, match="not an ovl.compute-candidates/v1"):
        tcand.parse_candidates({"$schema": "x"}, key, "doc")
    args = tcand.cli_args(key, 6, Path("/t"))
    assert args[:2] == ["candidates", "ag-gemm"] and args[-5:] == ["--top-k", "6", "--out", "/t", "--json"]
    assert "--any-rows" in args and args[args.index("--backend") + 1] == "copy-engine"
    with pytest.raises(TuneRefused):
        tcand.cli_args(lib.KernelKey("gemm-ar", 2, 512, 128, 64), 6, Path("/t"))


def test_without_a_compiler_or_prepared_candidates_tuning_says_what_to_run(monkeypatch, tmp_path):
    monkeypatch.delenv("OVL_CLI", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(lib.KernelNotCompiled, match="--candidates 6 --into"):
        tcand.prepare_candidates(lib.KernelKey("gemm-rs", 2, 512, 128, 64), 6)


@needs_cli
def test_candidates_are_listed_compiled_into_the_library_and_found_again_without_a_compiler(monkeypatch, tmp_path):
    monkeypatch.setenv("OVL_CLI", f"node {CLI}")
    key = lib.KernelKey("gemm-rs", 2, 1024, 256, 128)
    got = tcand.prepare_candidates(key, 4)
    assert 2 <= len(got) <= 4 and got[0].key == key and got[0].source in tcand.TABLE_SOURCES
    root = tmp_path / "cache"
    assert tcand.candidates_file(root, key).is_file()
    for c in got:
        m = lib.manifest_for(c.key)  # each compiled under its own name, its GEMM the configuration named
        assert compute_kernel_config(m.kernels) == c.config
    assert len({c.config for c in got}) == len(got)
    assert not [p for p in root.iterdir() if p.is_dir() and p.name.startswith(".")]  # temporaries gone (the lock file stays)
    # A GPU machine with no compiler finds the list and the kernels (here: the same library on OVL_KERNELS).
    monkeypatch.delenv("OVL_CLI")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("OVL_KERNELS", str(root))
    monkeypatch.setenv("OVL_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert [c.key for c in tcand.prepare_candidates(key, 4)] == [c.key for c in got]
    # A directory under a config's name holding another configuration is refused, not timed.
    other = dataclasses.replace(key, config=dataclasses.replace(got[-1].config, stages=got[-1].config.stages % 8 + 1))
    shutil.copytree(root / got[-1].key.dirname, root / other.dirname)
    with pytest.raises(ManifestError, match="its GEMM runs"):
        lib.manifest_for(other)


# ---- the whole path, with injected timings ----
class _FakeKernel:
    def __init__(self, label: str) -> None:
        self.label = label

    def launch(self) -> None:
        pass


@pytest.fixture
def fake_gpu(monkeypatch):
    """A 'device' for the tuner: torch.cuda answers as one H200 would, kernels load as stand-ins, and the timer
    returns the times a test injects per configuration (ms)."""
    import torch

    from ovl_runtime._tune import tuner

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda *a: type("P", (), {"multi_processor_count": 132})())
    monkeypatch.setattr(tuner, "BufferPool", lambda: None)
    monkeypatch.setattr(tuner, "Cublas", lambda M, N, K: _FakeKernel("cublas"))
    state: dict = {"times": {}, "loads": [], "listed": 0}

    def load(c, M, N, K, num_sms, pool, table=None):
        state["loads"].append(c.config.label)
        t = state["times"].get(c.config.label)
        return (None, "wrong result: relative error nan") if t is None else (_FakeKernel(c.config.label), None)

    def timed(members, count):
        return [[state["times"].get(getattr(m, "__self__", None).label, 0.5)] * count for m in members]  # type: ignore[union-attr]

    def prepare(key, top_k, into=None, timeout_s=None):
        state["listed"] += 1
        configs = [FLAT, WIDE, dataclasses.replace(WIDE, stages=3)][:top_k]
        return tcand.parse_candidates(_doc(key, configs), key, "fake")

    monkeypatch.setattr(tuner, "_load", load)
    monkeypatch.setattr(tuner, "sweeps", timed)
    monkeypatch.setattr(tuner, "prepare_candidates", prepare)
    monkeypatch.setattr(tuner, "compiler", lambda: ["ovl"])
    tuner.forget()
    yield state
    tuner.forget()


def test_tuning_binds_the_fastest_caches_it_and_the_next_process_binds_it_at_once(fake_gpu, caplog):
    from ovl_runtime._tune import tuner

    key = lib.KernelKey("gemm-rs", 6, 6144, 7168, 3200, target="h200")
    on = TuneSettings(enabled=True)
    assert tuner.tuned_key(key, None, TuneSettings()) == key  # off: the key itself, nothing measured
    assert fake_gpu["loads"] == []
    fake_gpu["times"] = {FLAT.label: 1.0, WIDE.label: 0.9}  # the third candidate computes a wrong result
    with caplog.at_level(logging.INFO, logger="ovl_runtime"):
        got = tuner.tuned_key(key, None, on)
    assert got == dataclasses.replace(key, config=WIDE)
    rec = tuner.records()[0]
    assert (rec.chosen, rec.table, rec.table_chosen, rec.ms, rec.table_ms, rec.cublas_ms) == (WIDE, FLAT, False, 0.9, 1.0, 0.5)
    assert rec.candidates[2].ms is None and "wrong result" in (rec.candidates[2].error or "")
    assert "gemm_tma_persistent 256x128x64 g8 s4 w8, 0.556 of cuBLAS" in caplog.text
    assert tcache.read_cache()[rec.entry] == rec
    # This process again: no listing, no loading.
    fake_gpu["loads"].clear()
    assert tuner.tuned_key(key, None, on) == got and fake_gpu["loads"] == [] and fake_gpu["listed"] == 1
    # A new process (nothing remembered): the cache binds it at once.
    tuner.forget()
    with caplog.at_level(logging.INFO, logger="ovl_runtime"):
        assert tuner.tuned_key(key, None, on) == got
    assert fake_gpu["loads"] == [] and fake_gpu["listed"] == 1 and "cached" in caplog.text
    assert tuner.records()[0].origin == "cache"


def test_noise_keeps_the_table_pick_and_an_untunable_shape_binds_it_with_a_warning(fake_gpu, caplog):
    from ovl_runtime._tune import tuner

    key = lib.KernelKey("ag-gemm", 3, 24576, 2560, 5120)
    fake_gpu["times"] = {FLAT.label: 1.0, WIDE.label: 0.995}
    assert tuner.tuned_key(key, None, TuneSettings(enabled=True)) == key  # the table's own operator
    assert tuner.records()[0].table_chosen
    fake_gpu["times"] = {}  # nothing runs correctly
    other = lib.KernelKey("ag-gemm", 5, 20480, 2560, 5120)
    with caplog.at_level(logging.WARNING, logger="ovl_runtime"):
        assert tuner.tuned_key(other, None, TuneSettings(enabled=True)) == other
    assert "not tuned (no candidate ran correctly" in caplog.text
    assert tcache.entry_key(other, "NVIDIA H200") not in tcache.read_cache()  # nothing cached: tried again next process


def test_an_any_row_count_candidate_must_overlap_every_row_count_the_table_pick_does():
    from types import SimpleNamespace

    from ovl_runtime._manifest.types import RowsSpec
    from ovl_runtime._tune.tuner import _narrower

    def m(lo: int, fallback: int | None = None) -> SimpleNamespace:
        return SimpleNamespace(rows=RowsSpec("ovl_rows", lo, 32766, 3, 8190, fallback, None))

    table = m(771)
    assert _narrower(m(387), table) is None and _narrower(m(771), table) is None
    assert _narrower(m(1539), table) == "serves 1539..32766 rows, the table's pick 771..32766"
    assert _narrower(m(771, 4000), table) == "overlaps from 4000 rows, the table's pick from 771"
    assert _narrower(m(771, 4000), m(771, 6000)) is None
    assert _narrower(SimpleNamespace(rows=None), table) is None  # a per-M operator serves its one M


def test_tuning_is_refused_while_a_cuda_graph_is_captured(fake_gpu, monkeypatch):
    import torch

    from ovl_runtime._tune import tuner

    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    key = lib.KernelKey("gemm-rs", 6, 6144, 7168, 3200)
    with pytest.raises(TuneRefused, match="CUDA graph capture"):
        tuner.tuned_key(key, None, TuneSettings(enabled=True))
    assert fake_gpu["listed"] == 0 and fake_gpu["loads"] == []
    assert tuner.tuned_key(key, None, TuneSettings()) == key  # tuning off: nothing changes, capture or not
    # Operators with no configurations to choose among are never tuned.
    moe = lib.KernelKey("gemm-ar", 2, 512, 128, 64)
    assert tuner.tuned_key(moe, None, TuneSettings(enabled=True)) == moe


def test_the_kernels_command_names_the_any_row_count_key_and_refuses_m_with_it(monkeypatch, tmp_path, capsys):
    from ovl_runtime._cli.main import main

    monkeypatch.delenv("OVL_CLI", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    base = ["kernels", "ag-gemm", "--world", "4", "--n", "2560", "--k", "5120"]
    assert main([*base, "--m", "8192", "--any-rows"]) == 2
    assert "drop --m" in capsys.readouterr().err
    assert main(base) == 2
    assert "give --m (or --any-rows" in capsys.readouterr().err
    # No compiler here: the any-row-count key is the one named (what the torch API binds by default).
    assert main([*base, "--any-rows", "--candidates", "5"]) == 2
    assert "no compiled ag-gemm for world 4, M=8192, N=2560, K=5120" in capsys.readouterr().err
