"""Where commands run: `local` (bubblewrap), `docker` (one container per trial), `none` (explicit opt-in).

Names load lazily: the shell server that runs inside the sandbox imports this package and must stay light."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the names `__getattr__` gives, for the type checker
    from unscaffold.minimal_harness.sandbox.base import Mount, Sandbox, SandboxConfig
    from unscaffold.minimal_harness.sandbox.factory import open_sandbox
    from unscaffold.minimal_harness.sandbox.result import ExecResult

__all__ = ["ExecResult", "Mount", "Sandbox", "SandboxConfig", "open_sandbox"]


def __getattr__(name: str) -> object:
    if name == "open_sandbox":
        from unscaffold.minimal_harness.sandbox.factory import open_sandbox

        return open_sandbox
    if name in ("Mount", "Sandbox", "SandboxConfig"):
        from unscaffold.minimal_harness.sandbox import base

        return getattr(base, name)
    if name == "ExecResult":
        from unscaffold.minimal_harness.sandbox.result import ExecResult

        return ExecResult
    raise AttributeError(name)
