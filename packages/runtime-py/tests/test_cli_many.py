"""Several manifests in one ``run``: report names, up-front refusals, failures that do not
stop the others, device errors that do; and ``gpu.run_gpu_many``'s control flow over a
stand-in GPU stack (one process group, sessions freed between manifests)."""

from __future__ import annotations

import gc
import importlib
import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import builders
import pytest

from ovl_runtime._cli import main as cli
from ovl_runtime._manifest.parse import load_manifest
from ovl_runtime._report.outcome import RunOutcome
from ovl_runtime.errors import CheckFailed, DeviceError, ManifestError, UsageError


def _write(path: Path, d: dict[str, Any]) -> Path:
    """Write manifest ``d`` (and stand-in kernel sources) at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for k in d["kernels"]:
        (path.parent / k["source"]).write_text(f"# {k['name']}\n")
    path.write_text(json.dumps(d))
    return path


def _named(d: dict[str, Any], name: str) -> dict[str, Any]:
    d["name"] = name
    return d


def _timing_out(d: dict[str, Any]) -> dict[str, Any]:
    """Rank 1 never sends its first chunk to rank 0: rank 0's wait on slot 2 times out."""
    d["hostOps"][1]["streams"][0]["ops"].pop(0)
    return d


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ovl_runtime", "run", *args], capture_output=True, text=True, timeout=120)


def _events(stderr: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


def test_several_manifests_write_one_report_each(tmp_path):
    a = _write(tmp_path / "cases" / "ag_w2" / "manifest.json", _named(builders.ag_gemm(world=2), "ag"))
    b = _write(tmp_path / "cases" / "rs_w2" / "manifest.json", _named(builders.gemm_rs(world=2), "rs"))
    c = _write(tmp_path / "more" / "pull.json", builders.all_gather_pull(world=2))
    out = tmp_path / "reports" / "new"
    p = _run(str(a), str(b), str(c), "--emulate", "--epochs", "2", "--out-dir", str(out))
    assert p.returncode == 0, p.stderr
    assert p.stdout == ""
    assert sorted(f.name for f in out.iterdir()) == ["ag_w2.json", "pull.json", "rs_w2.json"]
    for file, name in (("ag_w2.json", "ag"), ("rs_w2.json", "rs"), ("pull.json", "all_gather_pull_w2")):
        report = json.loads((out / file).read_text())
        assert report["manifest"] == name and report["ok"] is True and len(report["checks"]) == 2
    events = _events(p.stderr)
    cases = [e for e in events if e["event"] == "case"]
    assert [(e["index"], e["of"], e["manifest"]) for e in cases] == [(0, 3, "ag"), (1, 3, "rs"), (2, 3, "all_gather_pull_w2")]
    assert all("manifest" in e for e in events if e["event"] != "summary")
    assert [e["manifest"] for e in events if e["event"] == "done"] == ["ag", "rs", "all_gather_pull_w2"]
    # each case line comes before its manifest's own events
    first = {e["manifest"]: i for i, e in reversed(list(enumerate(events))) if "manifest" in e}
    assert all(events[first[e["manifest"]]] == e for e in cases)
    assert events[-1] == {"event": "summary", "of": 3, "reports": 3, "exitCode": 0}


def test_one_manifest_with_out_dir_is_named_by_its_folder(tmp_path):
    a = _write(tmp_path / "case_w2_x" / "manifest.json", builders.ag_gemm(world=2))
    p = _run(str(a), "--emulate", "--epochs", "1", "--out-dir", str(tmp_path / "r"))
    assert p.returncode == 0, p.stderr
    assert json.loads((tmp_path / "r" / "case_w2_x.json").read_text())["ok"] is True


def test_mixed_worlds_are_refused_before_anything_runs(tmp_path):
    a = _write(tmp_path / "a" / "manifest.json", builders.ag_gemm(world=2))
    b = _write(tmp_path / "b" / "manifest.json", builders.ag_gemm(world=4))
    out = tmp_path / "r"
    p = _run(str(a), str(b), "--emulate", "--out-dir", str(out))
    assert p.returncode == 2
    assert not out.exists()
    events = _events(p.stderr)
    assert [e["event"] for e in events] == ["error"]
    assert events[0]["code"] == "usage" and events[0]["file"] == str(b) and str(b) in events[0]["message"]


def test_a_bad_manifest_among_several_is_refused_naming_its_file(tmp_path):
    a = _write(tmp_path / "a" / "manifest.json", builders.ag_gemm(world=2))
    d = builders.gemm_rs(world=2)
    d["reference"]["output"] = "nope"
    b = _write(tmp_path / "b" / "manifest.json", d)
    out = tmp_path / "r"
    p = _run(str(a), str(b), str(tmp_path / "missing.json"), "--emulate", "--out-dir", str(out))
    assert p.returncode == 2 and not out.exists()
    (err,) = _events(p.stderr)
    assert err["code"] == "bad-manifest" and err["path"] == "reference.output" and err["file"] == str(b)
    assert err["message"].startswith(f"{b}: ")


@pytest.mark.parametrize("extra", [[], ["--out", "r.json"]])
def test_several_manifests_need_out_dir(tmp_path, extra):
    a = _write(tmp_path / "a" / "manifest.json", builders.ag_gemm(world=2))
    b = _write(tmp_path / "b" / "manifest.json", builders.ag_gemm(world=2))
    p = _run(str(a), str(b), "--emulate", *extra)
    assert p.returncode == 2 and p.stdout == ""
    assert not (tmp_path / "r.json").exists()
    (err,) = _events(p.stderr)
    assert err["code"] == "usage" and "--out-dir" in err["message"]


def test_out_and_out_dir_together_are_a_usage_error(tmp_path):
    a = _write(tmp_path / "a" / "manifest.json", builders.ag_gemm(world=2))
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", str(a), "--emulate", "--out", str(tmp_path / "x.json"), "--out-dir", str(tmp_path / "r")])
    assert exc.value.code == 2


@pytest.mark.parametrize(
    "layout", [("p/a/manifest.json", "q/a/manifest.json"), ("a/manifest.json", "a/manifest.json"), ("a/manifest.json", "b/a.json")]
)
def test_manifests_that_would_share_a_report_are_refused(tmp_path, layout):
    paths = [_write(tmp_path / rel, builders.ag_gemm(world=2)) for rel in layout]
    out = tmp_path / "r"
    p = _run(*map(str, paths), "--emulate", "--out-dir", str(out))
    assert p.returncode == 2 and not out.exists()
    (err,) = _events(p.stderr)
    assert err["code"] == "usage" and "a.json" in err["message"]


def test_report_names():
    assert cli.report_name("suite/mlp1_w2_ag_gemm_s1/manifest.json") == "mlp1_w2_ag_gemm_s1"
    assert cli.report_name("suite/x/ag.json") == "ag"
    assert cli.report_names(["s/a/manifest.json", "s/b/manifest.json", "t/a.manifest.json"]) == ["a", "b", "a.manifest"]
    with pytest.raises(UsageError, match="both write a.json"):
        cli.report_names(["s/a/manifest.json", "t/a.json"])


def test_a_wait_timeout_does_not_stop_the_others(tmp_path):
    a = _write(tmp_path / "a" / "manifest.json", _named(builders.ag_gemm(world=2), "first"))
    b = _write(tmp_path / "b" / "manifest.json", _named(_timing_out(builders.ag_gemm(world=2)), "stalls"))
    c = _write(tmp_path / "c" / "manifest.json", _named(builders.gemm_rs(world=2), "last"))
    out = tmp_path / "r"
    p = _run(str(a), str(b), str(c), "--emulate", "--epochs", "2", "--timeout-s", "2", "--out-dir", str(out))
    assert p.returncode == 3, p.stderr
    assert json.loads((out / "a.json").read_text())["ok"] is True
    assert json.loads((out / "c.json").read_text())["ok"] is True
    failed = json.loads((out / "b.json").read_text())
    (failure,) = failed["failures"]
    assert failed["ok"] is False and failure["code"] == "wait-timeout" and (failure["rank"], failure["slot"]) == (0, 2)
    events = _events(p.stderr)
    assert [(e["manifest"], e["exitCode"]) for e in events if e["event"] == "done"] == [("first", 0), ("stalls", 3), ("last", 0)]
    assert any(e["event"] == "error" and e["code"] == "wait-timeout" and e["manifest"] == "stalls" for e in events)
    assert not any(e["event"] == "skipped" for e in events)
    assert events[-1] == {"event": "summary", "of": 3, "reports": 3, "exitCode": 3}


def test_the_exit_code_is_the_worst_of_the_manifests(tmp_path):
    bad = builders.ag_gemm(world=2)
    bad["tables"][0]["values"][0][1] = bad["tables"][0]["values"][0][0]  # a tile computed twice, one never: check fails
    a = _write(tmp_path / "a" / "manifest.json", _named(bad, "wrong"))
    b = _write(tmp_path / "b" / "manifest.json", _named(_timing_out(builders.ag_gemm(world=2)), "stalls"))
    p = _run(str(a), str(b), "--emulate", "--epochs", "1", "--timeout-s", "2", "--out-dir", str(tmp_path / "r"))
    assert p.returncode == 3
    codes = {e["manifest"]: e["exitCode"] for e in _events(p.stderr) if e["event"] == "done"}
    assert codes == {"wrong": 1, "stalls": 3}


def test_a_device_error_skips_the_manifests_after_it(tmp_path, monkeypatch, capsys):
    paths = [_write(tmp_path / n / "manifest.json", _named(builders.ag_gemm(world=2), n)) for n in ("a", "b", "c")]
    emulate_mod = importlib.import_module("ovl_runtime._emulate.engine")  # the package exports a function of that name
    real = emulate_mod.emulate
    ran: list[str] = []

    def flaky(m, **kw):
        ran.append(m.name)
        if m.name == "b":
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return real(m, **kw)

    monkeypatch.setattr(emulate_mod, "emulate", flaky)
    out = tmp_path / "r"
    code = cli.main(["run", *map(str, paths), "--emulate", "--epochs", "1", "--out-dir", str(out)])
    assert code == 1 and ran == ["a", "b"]
    assert sorted(f.name for f in out.iterdir()) == ["a.json"]
    events = _events(capsys.readouterr().err)
    (err,) = [e for e in events if e["event"] == "error"]
    assert err["code"] == "device-error" and err["manifest"] == "b" and "illegal memory access" in err["message"]
    (skipped,) = [e for e in events if e["event"] == "skipped"]
    assert skipped["manifest"] == "c" and skipped["file"] == str(paths[2]) and "device-error in b" in skipped["reason"]
    assert events[-1] == {"event": "summary", "of": 3, "reports": 1, "exitCode": 1}


# ---- gpu.run_gpu_many over a stand-in GPU stack ----


class _Stack:
    """Stand-ins for torch, torch.distributed, triton and the GPU session: records the calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.alive = 0  # sessions not yet freed
        stack = self

        class Session:
            def __init__(self, m: Any, rank: int, num_sms: int, nvshmem: Any = None) -> None:
                stack.calls.append(f"session {m.name} (alive before: {stack.alive})" + (f" on {nvshmem}" if nvshmem else ""))
                stack.alive += 1  # __del__ runs also when __init__ raises
                if m.name.startswith("bad_kernel"):
                    raise ManifestError("kernels[0].source", "cannot import it")
                self.m, self.rank, self.nvshmem = m, rank, nvshmem
                self.cycle = self  # as a session and its precompiled kernels refer to each other

            def close(self) -> None:
                if self.nvshmem is not None:
                    stack.calls.append(f"close {self.m.name}")

            def __del__(self) -> None:
                stack.alive -= 1

        cuda = types.SimpleNamespace(
            set_device=lambda i: self.calls.append(f"set_device {i}"),
            current_device=lambda: 0,
            synchronize=lambda: None,
            get_device_properties=lambda i: types.SimpleNamespace(multi_processor_count=132),
            get_device_name=lambda: "Stand-in GPU",
            empty_cache=lambda: self.calls.append("empty_cache"),
        )
        self.dist = types.ModuleType("torch.distributed")
        self.dist.init_process_group = lambda backend, device_id=None, timeout=None: self.calls.append(  # type: ignore[attr-defined]
            f"init {backend}" + (f" timeout {timeout.total_seconds():g}s" if timeout is not None else "")
        )
        self.dist.get_rank = lambda: int(os.environ["RANK"])  # type: ignore[attr-defined]
        self.dist.get_world_size = lambda: int(os.environ["WORLD_SIZE"])  # type: ignore[attr-defined]
        self.store = object()
        self.dist.distributed_c10d = types.SimpleNamespace(_get_default_store=lambda: self.store)  # type: ignore[attr-defined]
        self.dist.barrier = lambda: self.calls.append("barrier")  # type: ignore[attr-defined]
        self.dist.destroy_process_group = lambda: self.calls.append("destroy")  # type: ignore[attr-defined]
        self.torch = types.ModuleType("torch")
        self.torch.cuda = cuda  # type: ignore[attr-defined]
        self.torch.device = lambda kind, index: (kind, index)  # type: ignore[attr-defined]
        self.torch.distributed = self.dist  # type: ignore[attr-defined]
        self.torch.__version__ = "stand-in"  # type: ignore[attr-defined]
        self.triton = types.ModuleType("triton")
        self.triton.set_allocator = lambda fn: self.calls.append("set_allocator")  # type: ignore[attr-defined]
        self.triton.__version__ = "stand-in"  # type: ignore[attr-defined]
        self.session_mod = types.ModuleType("ovl_runtime._runner.session")
        self.session_mod.GpuSession = Session  # type: ignore[attr-defined]
        self.session_mod.TORCH_DTYPES = {}  # type: ignore[attr-defined]
        self.session_mod.check_world = lambda m: self.calls.append(f"check_world {m.world}")  # type: ignore[attr-defined]
        self.reference_mod = types.ModuleType("ovl_runtime._runner.baselines")
        self.reference_mod.baselines = lambda *a: []  # type: ignore[attr-defined]

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for name, mod in (
            ("torch", self.torch),
            ("torch.distributed", self.dist),
            ("triton", self.triton),
            ("ovl_runtime._runner.session", self.session_mod),
            ("ovl_runtime._runner.baselines", self.reference_mod),
        ):
            monkeypatch.setitem(sys.modules, name, mod)
        for k, v in {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}.items():
            monkeypatch.setenv(k, v)
        for k in ("LOCAL_WORLD_SIZE", "OVL_NVSHMEM", "OVL_HOST_TIMEOUT_S"):  # one process per GPU unless a test says otherwise
            monkeypatch.delenv(k, raising=False)


def _checked_and_timed(stack: _Stack):
    def run(m, s, outcome, epochs, seed, progress):
        stack.calls.append(f"run {m.name}")
        progress({"event": "check", "run": 0})
        if m.name.startswith("wrong"):
            raise CheckFailed("run 0: rank 1 relative error 1 exceeds the tolerance", rank=1, run=0)
        if m.name.startswith("crash"):
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        outcome.times_ms = [[1.0], [1.0]]

    return run


def _manifests(tmp_path: Path, names: list[str]) -> list[Any]:
    return [load_manifest(_write(tmp_path / n / "manifest.json", _named(builders.ag_gemm(world=2), n))) for n in names]


def test_run_gpu_many_shares_one_process_group_and_frees_each_session(tmp_path, monkeypatch):
    from ovl_runtime._runner import torchrun as gpu

    stack = _Stack()
    stack.install(monkeypatch)
    monkeypatch.setattr(gpu, "_checked_and_timed", _checked_and_timed(stack))
    ms = _manifests(tmp_path, ["ok1", "wrong", "bad_kernel", "ok2", "crash", "never"])
    events: list[tuple[int, str, dict[str, Any]]] = []

    def progress_for(i, m):
        return lambda e: events.append((i, m.name, e))

    results = list(gpu.run_gpu_many(ms, progress_for=progress_for))
    assert len(results) == 5  # "never" is not run after the device error
    ok1, wrong, bad, ok2, crash = results
    assert isinstance(ok1, RunOutcome) and ok1.ok and ok1.device == "Stand-in GPU"
    assert isinstance(wrong, RunOutcome) and [f.code for f in wrong.failures] == ["check-failed"]
    assert isinstance(bad, ManifestError) and bad.path == "kernels[0].source"
    assert isinstance(ok2, RunOutcome) and ok2.ok
    assert isinstance(crash, DeviceError) and "illegal memory access" in str(crash)
    assert stack.calls == [
        "set_device 0",
        "init nccl",
        "check_world 2",
        "set_allocator",
        "session ok1 (alive before: 0)",
        "run ok1",
        "empty_cache",
        "barrier",
        "session wrong (alive before: 0)",
        "run wrong",
        "empty_cache",
        "barrier",
        "session bad_kernel (alive before: 0)",
        "empty_cache",
        "barrier",
        "session ok2 (alive before: 0)",
        "run ok2",
        "empty_cache",
        "barrier",
        "session crash (alive before: 0)",
        "run crash",
        "destroy",
    ]
    gc.collect()  # after a device error the run stops without collecting
    assert stack.alive == 0
    assert {(i, name) for i, name, _e in events} == {(0, "ok1"), (1, "wrong"), (3, "ok2"), (4, "crash")}
    assert [e["event"] for i, _n, e in events if i == 1] == ["allocated", "check", "failure"]


def test_run_gpu_many_refuses_mixed_worlds_before_the_process_group(tmp_path, monkeypatch):
    from ovl_runtime._runner import torchrun as gpu

    stack = _Stack()
    stack.install(monkeypatch)
    ms = [
        load_manifest(_write(tmp_path / "a" / "manifest.json", builders.ag_gemm(world=2))),
        load_manifest(_write(tmp_path / "b" / "manifest.json", builders.ag_gemm(world=4))),
    ]
    with pytest.raises(UsageError, match="worlds 2, 4"):
        list(gpu.run_gpu_many(ms))
    assert stack.calls == []


def test_run_gpu_is_run_gpu_many_of_one(tmp_path, monkeypatch):
    from ovl_runtime._runner import torchrun as gpu

    stack = _Stack()
    stack.install(monkeypatch)
    monkeypatch.setattr(gpu, "_checked_and_timed", _checked_and_timed(stack))
    seen: list[str] = []
    (ok,) = _manifests(tmp_path, ["ok"])
    outcome = gpu.run_gpu(ok, on_progress=lambda e: seen.append(e["event"]))
    assert outcome.ok and seen == ["allocated", "check"]
    assert stack.calls.count("init nccl") == 1 and stack.calls[-1] == "destroy"
    (bad,) = _manifests(tmp_path, ["bad_kernel"])
    with pytest.raises(ManifestError):
        gpu.run_gpu(bad)
    (crash,) = _manifests(tmp_path, ["crash"])
    with pytest.raises(DeviceError, match="illegal memory access"):
        gpu.run_gpu(crash)
    assert stack.calls.count("init nccl") == stack.calls.count("destroy") == 3


# ---- processes sharing a GPU: gloo, and NVSHMEM bootstrapped by ovl (stand-in nvshmem4py runtime) ----


class _StandInNvshmem:
    """Records ``DirectNvshmem.start`` and ``finalize`` in the stand-in stack's calls."""

    def __init__(self, stack: _Stack) -> None:
        self.stack = stack

    def start(self, rank: int, world: int, device: int, store: Any, timeout_s: float) -> _StandInNvshmem:
        assert store is self.stack.store
        self.stack.calls.append(f"nvshmem start pe {rank}/{world} gpu {device} bound {timeout_s:g}s")
        return self

    def finalize(self, peers_alive: bool) -> None:
        self.stack.calls.append(f"nvshmem finalize (peers alive: {peers_alive})")

    def __str__(self) -> str:
        return "direct-nvshmem"


def _nvshmem_manifest(name: str) -> Any:
    return types.SimpleNamespace(name=name, world=2, requires_nvshmem=True)


def _shared_gpu(monkeypatch: pytest.MonkeyPatch, stack: _Stack, local_rank: int) -> None:
    from ovl_runtime._runner import nvshmem_direct

    monkeypatch.setattr(nvshmem_direct, "DirectNvshmem", _StandInNvshmem(stack))
    for k, v in {"RANK": str(local_rank), "LOCAL_RANK": str(local_rank), "LOCAL_WORLD_SIZE": "2", "CUDA_VISIBLE_DEVICES": "0"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("OVL_HOST_TIMEOUT_S", "40")


def test_two_processes_on_one_gpu_run_nvshmem_manifests_on_ovls_own_nvshmem_over_gloo(tmp_path, monkeypatch):
    from ovl_runtime._runner import torchrun as gpu

    stack = _Stack()
    stack.install(monkeypatch)
    _shared_gpu(monkeypatch, stack, local_rank=1)
    monkeypatch.setattr(gpu, "_checked_and_timed", _checked_and_timed(stack))
    results = list(gpu.run_gpu_many([_nvshmem_manifest("nv1"), _nvshmem_manifest("nv2")]))
    assert [r.ok for r in results] == [True, True]
    assert results[0].backend == "NVSHMEM (nvshmem4py)" and results[0].extra["note"] == gpu.SHARED_NOTE
    assert os.environ["TORCH_SYMMMEM"] == "CUDA"  # PyTorch must not bootstrap a second NVSHMEM
    assert stack.calls == [
        "set_device 0",  # local rank 1 on the one visible GPU
        "init gloo timeout 40s",
        "check_world 2",
        "nvshmem start pe 1/2 gpu 0 bound 40s",
        "set_allocator",
        "session nv1 (alive before: 0) on direct-nvshmem",
        "run nv1",
        "close nv1",
        "empty_cache",
        "barrier",
        "session nv2 (alive before: 0) on direct-nvshmem",
        "run nv2",
        "close nv2",
        "empty_cache",
        "barrier",
        "barrier",  # the bounded barrier before NVSHMEM's collective finalize
        "nvshmem finalize (peers alive: True)",
        "destroy",
    ]


def test_a_peer_gone_before_teardown_skips_nvshmems_collective_finalize(tmp_path, monkeypatch):
    from ovl_runtime._runner import torchrun as gpu

    stack = _Stack()
    stack.install(monkeypatch)
    _shared_gpu(monkeypatch, stack, local_rank=0)
    monkeypatch.setattr(gpu, "_checked_and_timed", _checked_and_timed(stack))

    def barrier() -> None:
        raise RuntimeError("[gloo] Timed out waiting 40000ms for recv operation")

    stack.dist.barrier = barrier  # type: ignore[attr-defined]
    gen = gpu.run_gpu_many([_nvshmem_manifest("nv")])
    assert next(gen).ok
    with pytest.raises(RuntimeError, match="Timed out"):  # the barrier between manifests: the group is broken
        next(gen)
    assert stack.calls[-2:] == ["nvshmem finalize (peers alive: False)", "destroy"]


def test_one_process_per_gpu_keeps_nccl_and_pytorchs_nvshmem(tmp_path, monkeypatch):
    from ovl_runtime._runner import torchrun as gpu

    stack = _Stack()
    stack.install(monkeypatch)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setattr(gpu, "_checked_and_timed", _checked_and_timed(stack))

    def select(backend: str) -> None:  # the real one refuses NVSHMEM here: the stand-in torch is imported already
        stack.calls.append(f"symm {backend}")
        monkeypatch.setenv("TORCH_SYMMMEM", backend.upper())

    monkeypatch.setattr(gpu, "select_symm_backend", select)
    (r,) = gpu.run_gpu_many([_nvshmem_manifest("nv")])
    assert isinstance(r, RunOutcome) and r.ok and r.backend == "NVSHMEM"
    assert stack.calls[:3] == ["symm nvshmem", "set_device 0", "init nccl"]
    assert not any(c.startswith("nvshmem") for c in stack.calls)


@pytest.mark.parametrize(
    ("env", "baselines", "match"),
    [
        (
            {"OVL_NVSHMEM": "torch"},
            False,
            "OVL_NVSHMEM=torch, but 2 processes share 1 GPU.*limited multiple-processes-per-GPU.*nvshmem-mpg-h200",
        ),
        ({"OVL_NVSHMEM": "shmem"}, False, "OVL_NVSHMEM='shmem': use one of auto, direct, torch"),
        ({}, True, "--baselines times NCCL collectives.*2 processes share 1 GPU"),
    ],
)
def test_what_cannot_run_on_a_shared_gpu_is_refused_before_the_process_group(tmp_path, monkeypatch, env, baselines, match):
    from ovl_runtime._runner import torchrun as gpu

    stack = _Stack()
    stack.install(monkeypatch)
    _shared_gpu(monkeypatch, stack, local_rank=0)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(UsageError, match=match):
        list(gpu.run_gpu_many([_nvshmem_manifest("nv")], baselines=baselines))
    assert stack.calls == []
