"""The Python runner and its npm driver are released at one version: ``ovl_runtime.__version__``
(``_version.py``, which pyproject.toml reads) must be ``package.json``'s, which ``changeset version``
bumps; ``pnpm version-packages`` copies it over (``scripts/sync-python-version.ts``)."""

import json
from importlib import metadata
from pathlib import Path

import pytest

import ovl_runtime

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def test_version_is_the_npm_packages():
    npm = json.loads((PACKAGE_DIR / "package.json").read_text())["version"]
    assert ovl_runtime.__version__ == npm, "run `pnpm version-packages` (changeset version, then the Python sync)"


def test_pyproject_reads_the_version_from_the_module():
    text = (PACKAGE_DIR / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in text
    assert 'version = { attr = "ovl_runtime._version.__version__" }' in text


def test_installed_metadata_agrees():
    try:
        installed = metadata.version("ovl-runtime")
    except metadata.PackageNotFoundError:
        pytest.skip("ovl-runtime is not installed (sources on PYTHONPATH)")
    assert installed == ovl_runtime.__version__, "reinstall the runner: its metadata predates the version bump"
