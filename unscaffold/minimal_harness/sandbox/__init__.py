"""Where commands run: `local` (bubblewrap), `docker` (one container per trial), `none` (explicit opt-in)."""

from unscaffold.minimal_harness.sandbox.base import ExecResult, Mount, Sandbox, SandboxConfig
from unscaffold.minimal_harness.sandbox.factory import open_sandbox

__all__ = ["ExecResult", "Mount", "Sandbox", "SandboxConfig", "open_sandbox"]
