"""Shared fixtures: sandboxes, replay files written on the fly, a Docker engine and image (helpers.py holds
the plain helpers)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """Every temporary file of the code under test goes under this session's pytest folder, which pytest
    rotates: `tempfile` users (workspaces, scoring folders, the shell server's copy), multiprocessing's `pymp-*`
    folders, and child processes through TMPDIR. So a test run leaves nothing new directly under /tmp, even
    where a test kills a process before its clean-up runs. Set before the tests are imported, so constants
    made from the temporary folder at import see it too. Ray's session folders stay in /tmp/ray, one folder
    every run reuses: under the pytest folder its socket paths would pass the kernel's 107-character limit."""
    if not hasattr(config, "_tmp_path_factory"):  # pytest without its tmp_path plugin (-p no:tmpdir)
        return
    root = config._tmp_path_factory.mktemp("tmp", numbered=False)
    os.environ.setdefault("RAY_TMPDIR", tempfile.gettempdir())
    os.environ["TMPDIR"] = str(root)
    tempfile.tempdir = str(root)


@pytest.fixture
def box(tmp_path: Path):
    """A local sandbox over `tmp_path/ws`, closed after the test."""
    from unscaffold.minimal_harness.sandbox import SandboxConfig, open_sandbox

    sandbox = open_sandbox(SandboxConfig(kind="local", workspace=tmp_path / "ws", timeout_s=20))
    yield sandbox
    sandbox.close()


@pytest.fixture
def write_replay(tmp_path: Path):
    """Write a replay file from a dict and return its spec."""

    def write(entries: dict[str, list[dict[str, Any]]], name: str = "replay.json") -> str:
        path = tmp_path / name
        path.write_text(json.dumps(entries))
        return f"replay:{path}"

    return write


@pytest.fixture(scope="session")
def docker_engine():
    """A client for a Docker engine that answers; otherwise the test is skipped, saying why."""
    import docker

    try:
        client = docker.from_env()
        client.ping()
    except Exception as e:  # noqa: BLE001 - any failure means no engine here
        pytest.skip(f"no Docker engine answers ({' '.join(str(e).split())[:120]}): `make test` as root starts one")
    return client


@pytest.fixture(scope="session")
def docker_suites_image(docker_engine, tmp_path_factory) -> str:
    """The image the built-in suites run on under `--sandbox docker`: built from the shipped Dockerfile where
    a registry answers, else from this machine's Debian mirror (once; skipped when neither can be made)."""
    from unscaffold.errors import SandboxUnavailable
    from unscaffold.minimal_harness.sandbox.base import SandboxConfig
    from unscaffold.minimal_harness.sandbox.docker_sandbox import ensure_image

    try:
        return ensure_image(docker_engine, SandboxConfig(kind="docker", workspace=tmp_path_factory.mktemp("ws")))
    except SandboxUnavailable as e:
        pytest.skip(f"the suites' image cannot be made here: {e}")


@pytest.fixture(scope="session", autouse=True)
def no_stale_shell_copies():
    """Runs the tests kill (SIGKILL, `os._exit`, forked workers) never remove their copy of the shell server
    from the temporary folder: remove those once the session ends (this process removes its own at exit)."""
    yield
    from unscaffold.minimal_harness.sandbox.local import remove_stale_server_copies

    remove_stale_server_copies()
