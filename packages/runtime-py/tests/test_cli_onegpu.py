"""``run --ranks-on-one-gpu`` refuses what it cannot run with a usage error (exit 2), never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import builders

from ovl_runtime._manifest.parse import load_manifest
from ovl_runtime._report.outcome import CheckRecord, RunOutcome
from ovl_runtime._report.report import build_report


def _write(folder: Path, d: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for k in d["kernels"]:
        (folder / k["source"]).write_text(f"# {k['name']}\n")
    p = folder / "manifest.json"
    p.write_text(json.dumps(d))
    return p


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(
        [sys.executable, "-m", "ovl_runtime", "run", *args], capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})}
    )


def _error(p: subprocess.CompletedProcess) -> dict:
    events = [json.loads(line) for line in p.stderr.splitlines() if line.startswith("{")]
    assert "Traceback" not in p.stderr, p.stderr
    (err,) = [e for e in events if e["event"] == "error"]
    return err


def test_without_a_gpu_it_is_a_usage_error_naming_the_way_out(tmp_path):
    m = _write(tmp_path / "ag", builders.ag_gemm(world=2))
    p = _run(str(m), "--ranks-on-one-gpu", "--out", str(tmp_path / "r.json"))
    assert p.returncode == 2
    err = _error(p)
    assert err["code"] == "usage" and "needs torch, triton and a CUDA device" in err["message"] and "--emulate" in err["message"]
    assert not (tmp_path / "r.json").exists()


def test_it_goes_with_neither_emulate_nor_baselines_nor_torchrun(tmp_path):
    m = str(_write(tmp_path / "ag", builders.ag_gemm(world=2)))
    assert "choose one" in _error(_run(m, "--ranks-on-one-gpu", "--emulate"))["message"]
    assert "--baselines" in _error(_run(m, "--ranks-on-one-gpu", "--baselines"))["message"]
    p = _run(m, "--ranks-on-one-gpu", env={"WORLD_SIZE": "2"})
    assert p.returncode == 2 and "not torchrun" in _error(p)["message"]


def test_a_bad_manifest_is_still_reported_as_such(tmp_path):
    d = builders.ag_gemm(world=2)
    d["world"] = 0
    p = _run(str(_write(tmp_path / "bad", d)), "--ranks-on-one-gpu")
    assert p.returncode == 2 and _error(p)["code"] == "bad-manifest"


def test_a_one_gpu_report_says_its_mode_and_that_its_times_are_not_performance(tmp_path):
    m = load_manifest(_write(tmp_path / "ag", builders.ag_gemm(world=2)))
    o = RunOutcome(
        mode="one-gpu",
        device="GPU",
        backend="none (one process, plain tensors)",
        clock="cuda-events",
        checks=[CheckRecord.of(0, 2, [1e-3, 2e-3], 0.02)],
        times_ms=[[1.0, 2.0], [1.5, 2.5]],
        extra={"note": "all ranks share one GPU: times are not performance figures"},
    )
    r = build_report(m, o)
    assert r["mode"] == "one-gpu" and r["ok"] is True and "not performance" in r["extra"]["note"]
