import json
import subprocess
import sys
from pathlib import Path

import builders
import pytest

from ovl_runtime._cli.main import main
from ovl_runtime._runner.env import SAFE_ENV


def _write(tmp_path: Path, d: dict) -> Path:
    for k in d["kernels"]:
        (tmp_path / k["source"]).write_text(f"# {k['name']}\n")
    p = tmp_path / "m.json"
    p.write_text(json.dumps(d))
    return p


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ovl_runtime", "run", *args], capture_output=True, text=True, timeout=60)


def _events(stderr: str) -> list[dict]:
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


def test_run_emulated_writes_a_report_and_streams_progress(tmp_path):
    m = _write(tmp_path, builders.gemm_rs(world=2))
    out = tmp_path / "report.json"
    p = _run(str(m), "--emulate", "--out", str(out), "--epochs", "3")
    assert p.returncode == 0, p.stderr
    report = json.loads(out.read_text())
    assert report["$schema"] == "ovl.report/v1" and report["ok"] is True
    assert report["manifest"] == "gemm_rs_w2" and report["mode"] == "emulate" and report["world"] == 2
    assert report["shapes"]["operator"] == "gemm-rs" and report["shapes"]["buffers"]["P"] == [2, 64, 64]
    assert [c["epoch"] for c in report["checks"]] == [1, 2, 3] and all(c["maxRelError"] < 1e-5 for c in report["checks"])
    assert len(report["times"]["perRank"]) == 2 and report["times"]["maxMedian"] >= report["times"]["perRank"][0]["median"]
    assert report["failures"] == []
    events = _events(p.stderr)
    assert events[0]["event"] == "start" and events[-1] == {"event": "done", "ok": True, "exitCode": 0}
    assert sum(e["event"] == "check" for e in events) == 3


def test_without_out_the_report_goes_to_stdout(tmp_path):
    m = _write(tmp_path, builders.ag_gemm(world=2))
    p = _run(str(m), "--emulate", "--epochs", "1")
    assert p.returncode == 0 and json.loads(p.stdout)["checks"][0]["ok"] is True


def test_a_wait_timeout_exits_3_with_the_failure_in_the_report(tmp_path):
    d = builders.ag_gemm(world=2)
    d["hostOps"][1]["streams"][0]["ops"].pop(0)
    m = _write(tmp_path, d)
    out = tmp_path / "r.json"
    p = _run(str(m), "--emulate", "--out", str(out), "--timeout-s", "0.2")
    assert p.returncode == 3
    (failure,) = json.loads(out.read_text())["failures"]
    assert failure["code"] == "wait-timeout" and (failure["rank"], failure["slot"], failure["seen"], failure["expected"]) == (0, 2, 0, 1)
    assert any(e["event"] == "error" and e["code"] == "wait-timeout" for e in _events(p.stderr))


def test_a_failed_check_exits_1(tmp_path):
    d = builders.ag_gemm(world=2)
    d["tables"][0]["values"][0][1] = d["tables"][0]["values"][0][0]
    p = _run(str(_write(tmp_path, d)), "--emulate")
    assert p.returncode == 1
    assert json.loads(p.stdout)["failures"][0]["code"] == "check-failed"


def test_a_bad_manifest_exits_2_naming_the_field(tmp_path):
    d = builders.ag_gemm(world=2)
    d["reference"]["output"] = "nope"
    p = _run(str(_write(tmp_path, d)), "--emulate")
    assert p.returncode == 2 and p.stdout == ""
    (err,) = [e for e in _events(p.stderr) if e["event"] == "error"]
    assert err["code"] == "bad-manifest" and err["path"] == "reference.output"


@pytest.mark.parametrize("argv", [["run"], ["frobnicate"], ["run", "m.json", "--epochs", "0"]])
def test_usage_errors_exit_2(argv, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        sys.exit(main(argv))
    assert exc.value.code == 2


def test_the_multicast_switches_are_always_set(tmp_path, monkeypatch):
    for k in SAFE_ENV:
        monkeypatch.setenv(k, "1" if k == "NCCL_NVLS_ENABLE" else "0")
    m = _write(tmp_path, builders.ag_gemm(world=2))
    assert main(["run", str(m), "--emulate", "--epochs", "1", "--out", str(tmp_path / "r.json")]) == 0
    import os

    assert {k: os.environ[k] for k in SAFE_ENV} == SAFE_ENV and os.environ["TORCH_SYMMMEM"] == "CUDA"


def test_the_gpu_path_imports_without_torch():
    import importlib

    gpu = importlib.import_module("ovl_runtime._runner.torchrun")
    assert callable(gpu.run_gpu)
