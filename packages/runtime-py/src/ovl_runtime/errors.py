"""Errors of the runner, as values the caller can inspect.

Every error carries a string ``code`` (shared with the TypeScript driver and the exit code
of ``python -m ovl_runtime``) and a message that says what to fix and where.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "EXIT_BAD_MANIFEST",
    "EXIT_CHECK_FAILED",
    "EXIT_OK",
    "EXIT_WAIT_TIMEOUT",
    "CheckFailed",
    "DeviceError",
    "KernelFault",
    "ManifestError",
    "RunnerError",
    "UsageError",
    "WaitTimeout",
]

#: The exit status of ``python -m ovl_runtime`` for each outcome (an error's ``exit_code``).
EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_BAD_MANIFEST = 2
EXIT_WAIT_TIMEOUT = 3


class RunnerError(Exception):
    """Base of every error the runner reports; ``code`` names the kind, ``exit_code`` the status."""

    code = "runner-error"
    exit_code = EXIT_CHECK_FAILED

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "message": str(self)}


class ManifestError(RunnerError, ValueError):
    """A manifest that does not satisfy ``ovl.manifest/v1``; ``path`` names the field."""

    code = "bad-manifest"
    exit_code = EXIT_BAD_MANIFEST

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.detail = message

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "message": str(self), "path": self.path}


class UsageError(RunnerError):
    """A command line or environment the runner cannot work with (no torchrun, wrong world...)."""

    code = "usage"
    exit_code = EXIT_BAD_MANIFEST


class WaitTimeout(RunnerError):
    """A bounded wait (device, host stream or emulated) gave up: the schedule would hang."""

    code = "wait-timeout"
    exit_code = EXIT_WAIT_TIMEOUT

    def __init__(self, rank: int, slot: int, seen: int, expected: int, where: str = "") -> None:
        self.rank, self.slot, self.seen, self.expected, self.where = rank, slot, seen, expected, where
        at = f" in {where}" if where else ""
        super().__init__(
            f"rank {rank}: wait on signal slot {slot}{at} timed out: saw {seen}, expected >= {expected} "
            "(a copy or notify that should fill this slot never ran, or the wait table names the wrong slot)"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "message": str(self),
            "rank": self.rank,
            "slot": self.slot,
            "seen": self.seen,
            "expected": self.expected,
        }


class CheckFailed(RunnerError):
    """An output differed from the reference (or held NaN/inf: an element nobody wrote)."""

    code = "check-failed"
    exit_code = EXIT_CHECK_FAILED

    def __init__(self, message: str, rank: int | None = None, run: int | None = None) -> None:
        super().__init__(message)
        self.rank, self.run = rank, run

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": str(self)}
        if self.rank is not None:
            out["rank"] = self.rank
        if self.run is not None:
            out["run"] = self.run
        return out


class KernelFault(RunnerError):
    """A kernel indexed outside a buffer or table (on a GPU this is an illegal address)."""

    code = "kernel-fault"
    exit_code = EXIT_CHECK_FAILED


class DeviceError(RunnerError):
    """The GPU stack failed underneath the runner (allocation, rendezvous, compilation...)."""

    code = "device-error"
    exit_code = EXIT_CHECK_FAILED
