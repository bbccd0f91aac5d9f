"""GPU tests: run on a machine with a CUDA device (``pytest tests_gpu``), never in interpreter
mode (``tests/`` puts Triton in it); collected on their own, skipped without a GPU."""

import os

if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
    raise RuntimeError("tests_gpu runs real kernels: unset TRITON_INTERPRET (run pytest tests_gpu on its own)")


import pytest  # noqa: E402


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kernels(op): the test needs the compiled kernels of operator op only")


@pytest.fixture(autouse=True)
def _fresh():
    """Every test starts with no bound operator: close (and free) what the last one left."""
    yield
    from ovl_runtime import ops

    ops.close_all(force=True)
