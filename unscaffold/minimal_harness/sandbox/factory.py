"""Opens the sandbox a config asks for."""

from __future__ import annotations

import warnings

from unscaffold.minimal_harness.sandbox.base import Sandbox, SandboxConfig


def open_sandbox(config: SandboxConfig) -> Sandbox:
    if config.kind == "local":
        from unscaffold.minimal_harness.sandbox.local import LocalSandbox

        return LocalSandbox(config)
    if config.kind == "docker":
        from unscaffold.minimal_harness.sandbox.docker_sandbox import DockerSandbox

        return DockerSandbox(config)
    from unscaffold.minimal_harness.sandbox.none import UnisolatedSandbox

    warnings.warn("--sandbox none: model commands run on the host without isolation", stacklevel=2)
    return UnisolatedSandbox(config)
