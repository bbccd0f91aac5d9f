"""The runner's version: the one Python copy of ``packages/runtime-py/package.json``'s version.

A release bumps package.json (``changeset version``), then ``pnpm version-packages`` runs
``scripts/sync-python-version.ts``, which rewrites this line; pyproject.toml reads it
(``[tool.setuptools.dynamic]``), so the wheel's metadata and ``ovl_runtime.__version__``
cannot differ, and ``tests/test_version.py`` fails when this line and package.json do.
"""

__version__ = "0.2.0"
