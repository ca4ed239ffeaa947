"""DockerSandbox: pure kwargs/argv, a fake engine for the lifecycle, the exec wrapper on the host, live tests."""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest

from tests.helpers import eventually
from unscaffold.errors import SandboxUnavailable
from unscaffold.minimal_harness.sandbox import docker_sandbox as ds
from unscaffold.minimal_harness.sandbox import owner
from unscaffold.minimal_harness.sandbox.base import SUITES_IMAGE_DIR, Limits, Mount, SandboxConfig
from unscaffold.minimal_harness.sandbox.docker_sandbox import (
    EXEC_WRAPPER,
    DockerSandbox,
    container_kwargs,
    exec_argv,
    live_container_ids,
)
from unscaffold.minimal_harness.sandbox.output import HEAD_CHARS, TAIL_CHARS
from unscaffold.minimal_harness.sandbox.stream import TIMEOUT_EXIT_CODE, timeout_note

# ---------------------------------------------------------------- pure functions


def test_container_kwargs_exact(tmp_path: Path) -> None:
    ws, data, out = tmp_path / "ws", tmp_path / "data", tmp_path / "out"
    config = SandboxConfig(
        kind="docker",
        workspace=ws,
        workdir="/app",
        mounts=[Mount(source=data, target="/data"), Mount(source=out, target="/out", writable=True)],
        limits=Limits(memory_bytes=2 * 1024**3, processes=256, file_size_bytes=1024**3),
        image="python:3.11-slim",
        env={"FOO": "bar"},
    )
    kw = container_kwargs(config)
    assert kw["image"] == "python:3.11-slim"
    assert kw["command"] == ["sleep", "infinity"]
    assert kw["detach"] is True
    assert kw["init"] is True
    assert kw["volumes"] == [f"{ws.resolve()}:/app:rw", f"{data.resolve()}:/data:ro", f"{out.resolve()}:/out:rw"]
    assert kw["working_dir"] == "/app"
    assert kw["network_mode"] == "none"
    assert kw["mem_limit"] == 2 * 1024**3
    assert kw["memswap_limit"] == 2 * 1024**3
    assert kw["pids_limit"] == 256
    assert kw["ulimits"] == [{"Name": "fsize", "Soft": 1024**3, "Hard": 1024**3}]
    assert kw["labels"] == {"unscaffold": "1", "unscaffold.owner": owner.token()}
    assert kw["user"] == f"{os.getuid()}:{os.getgid()}"  # no uid of its own: the host user
    assert kw["cap_drop"] == ["ALL"] and kw["security_opt"] == ["no-new-privileges"]
    assert kw["read_only"] is True  # the root takes no writes: disk is the workspace and the sized tmpfs only
    assert kw["tmpfs"] == {"/tmp": f"size={1024**3},mode=1777", "/var/tmp": f"size={256 * 1024**2},mode=1777",
                           "/run": f"size={256 * 1024**2},mode=755"}
    assert container_kwargs(config, uid=1_610_000_007)["user"] == "1610000007:1610000007"  # never root
    env = kw["environment"]
    assert "PATH" not in env  # the image's own PATH (its ENV), never the host virtualenv's
    assert env["HOME"] == "/tmp" and env["FOO"] == "bar" and env["LANG"] == "C.UTF-8"


def test_container_kwargs_network_and_default_cwd(tmp_path: Path) -> None:
    config = SandboxConfig(kind="docker", workspace=tmp_path, network=True, env={"PATH": "/opt/bin:/bin"})
    kw = container_kwargs(config)
    assert "network_mode" not in kw  # the engine's default network
    assert kw["working_dir"] == str(tmp_path)
    assert kw["volumes"] == [f"{tmp_path.resolve()}:{tmp_path}:rw"]
    assert kw["environment"]["PATH"] == "/opt/bin:/bin"  # an explicit PATH wins


def test_container_kwargs_accepted_by_the_sdk(tmp_path: Path) -> None:
    """The SDK turns the kwargs into an API request without complaint (no engine needed)."""
    from docker.models.containers import _create_container_args

    config = SandboxConfig(kind="docker", workspace=tmp_path, workdir="/app")
    kw = {k: v for k, v in container_kwargs(config).items() if k != "detach"}
    args = _create_container_args({**kw, "version": "1.44"})
    host = args["host_config"]
    assert host["Binds"] == [f"{tmp_path.resolve()}:/app:rw"]
    assert host["NetworkMode"] == "none" and host["Init"] is True and host["PidsLimit"] == 1024
    assert host["Ulimits"] == [{"Name": "fsize", "Soft": 2 * 1024**3, "Hard": 2 * 1024**3}]


def test_exec_argv_exact() -> None:
    assert exec_argv("echo hi", 5) == ["bash", "-c", EXEC_WRAPPER, "unscaffold-exec", "5.000", "echo hi"]
    assert exec_argv("ls", 0.25)[4] == "0.250"


# ---------------------------------------------------------------- the exec wrapper, run on this host

needs_setsid = pytest.mark.skipif(
    shutil.which("setsid") is None or shutil.which("bash") is None, reason="needs bash and setsid"
)


def _run_wrapper(command: str, timeout_s: float) -> tuple[int, str]:
    """The wrapper's exit code and output; a wrapper still running after 60 s fails the test (TimeoutExpired)."""
    proc = subprocess.run(
        exec_argv(command, timeout_s), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60, check=False
    )
    return proc.returncode, proc.stdout.decode()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


@needs_setsid
def test_wrapper_passes_exit_code_and_output() -> None:
    code, out = _run_wrapper("echo out; echo err >&2; exit 7", 10)
    assert code == 7
    assert "out" in out and "err" in out


@needs_setsid
def test_wrapper_timeout_kills_the_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    # Sleeps of an hour: had the wrapper waited for either, the test would hang rather than pass.
    code, out = _run_wrapper(f"sleep 3600 & echo $! > {pidfile}; echo started; sleep 3600", 1)
    assert code == TIMEOUT_EXIT_CODE
    assert out == "started\n"  # no job-control chatter from the wrapper
    assert eventually(lambda: not _alive(int(pidfile.read_text())))


@needs_setsid
def test_wrapper_kills_leftover_background_processes(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    code, out = _run_wrapper(f"sleep 3600 & echo $! > {pidfile}; echo done", 30)
    assert code == 0 and out == "done\n"  # a wait for the hour-long sleep would time out
    assert eventually(lambda: not _alive(int(pidfile.read_text())))


# ---------------------------------------------------------------- a fake engine

_ids = itertools.count(1)


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


TOP_TITLES = ["UID", "PID", "PPID", "C", "STIME", "TTY", "TIME", "CMD"]
KEEPER_PIDS = [4_000_001, 4_000_002]  # listed by the fake engine as the container's init and keeper


def top_rows(pids: list[int]) -> dict[str, Any]:
    return {"Titles": TOP_TITLES, "Processes": [["1000", str(p), "1", "0", "12:00", "?", "00:00:00", "x"]
                                                 for p in pids]}


class FakeContainer:
    """`extra`: host pids the engine lists beside the keepers (what commands left); a restart clears them."""

    def __init__(self, kwargs: dict[str, Any], fail_start: bool, archive: bytes | None = None,
                 remove_error: Exception | None = None) -> None:
        self.id = f"fake{next(_ids)}"
        self.kwargs, self.fail_start, self.archive = kwargs, fail_start, archive
        self.labels = kwargs.get("labels", {})
        self.started = False
        self.removals: list[dict[str, Any]] = []
        self.extra: list[int] = []
        self.calls: list[str] = []
        self.remove_error = remove_error

    def top(self) -> dict[str, Any]:
        """A killed process leaves the listing once it is no longer running (the container's init reaps it)."""
        return top_rows(KEEPER_PIDS + [p for p in self.extra if _running(p)])

    def pause(self) -> None:
        self.calls.append("pause")

    def unpause(self) -> None:
        self.calls.append("unpause")

    def restart(self, timeout: int) -> None:
        self.calls.append(f"restart {timeout}")
        self.extra = []

    def get_archive(self, path: str) -> tuple[list[bytes], dict[str, Any]]:
        if self.archive is None:
            raise docker.errors.NotFound(f"no such path {path}")
        return [self.archive[:10], self.archive[10:]], {"name": path}

    def start(self) -> None:
        if self.fail_start:
            raise docker.errors.APIError("cannot start: bind source path does not exist")
        self.started = True

    def remove(self, **kwargs: Any) -> None:
        self.removals.append(kwargs)
        if self.remove_error is not None:
            raise self.remove_error


class FakeContainers:
    def __init__(self, fail_start: bool, archive: bytes | None = None) -> None:
        self.fail_start, self.archive = fail_start, archive
        self.created: list[FakeContainer] = []
        self.existing: list[FakeContainer] = []  # containers of earlier processes
        self.remove_error: Exception | None = None

    def create(self, **kwargs: Any) -> FakeContainer:
        c = FakeContainer(kwargs, self.fail_start, self.archive, self.remove_error)
        self.created.append(c)
        return c

    def list(self, all: bool = False, filters: dict[str, str] | None = None) -> list[FakeContainer]:
        assert all and filters == {"label": "unscaffold=1"}
        return list(self.existing)


class FakeImages:
    """Tags the engine has; `build` records each build and, unless told to fail, adds the tag."""

    def __init__(self, have: set[str] | None = None, build_log: list[dict[str, str]] | None = None) -> None:
        self.have = set(have or ())
        self.builds: list[dict[str, Any]] = []
        self.build_log = build_log

    def get(self, tag: str) -> object:
        if tag not in self.have:
            raise docker.errors.ImageNotFound(f"no such image: {tag}")
        return object()

    def build(self, **kwargs: Any) -> Any:
        self.builds.append(kwargs)
        if self.build_log is not None:
            raise docker.errors.BuildError("The command '/bin/sh -c go build' returned a non-zero code: 127",
                                           iter(self.build_log))
        self.have.add(kwargs["tag"])
        return object(), iter([])

    def pull(self, image: str) -> None:
        self.have.add(image)


class FakeAPI:
    """`on_exec`: run for each command (a command that leaves a process behind adds its pid)."""

    def __init__(self, chunks: list[bytes], exit_code: int, delay_s: float) -> None:
        self.chunks, self.exit_code, self.delay_s = chunks, exit_code, delay_s
        self.execs: list[tuple[str, list[str], dict[str, Any]]] = []
        self.on_exec: Any = None

    def exec_create(self, container: str, cmd: list[str], **kwargs: Any) -> dict[str, str]:
        self.execs.append((container, cmd, kwargs))
        if self.on_exec is not None:
            self.on_exec(container)
        return {"Id": f"exec{len(self.execs)}"}

    def exec_start(self, exec_id: str, stream: bool = False, demux: bool = False) -> Any:
        assert stream and not demux

        def gen() -> Any:
            yield from self.chunks
            time.sleep(self.delay_s)

        return gen()

    def exec_inspect(self, exec_id: str) -> dict[str, Any]:
        return {"ExitCode": self.exit_code, "Running": False}


class FakeNetworks:
    """A daemon started with `--bridge=none` has no bridge network: builds then use the host's."""

    def __init__(self, bridge: bool) -> None:
        self.bridge = bridge

    def list(self, names: list[str]) -> list[object]:
        return [object()] if self.bridge and names == ["bridge"] else []


class FakeClient:
    def __init__(
        self, chunks: list[bytes] | None = None, exit_code: int = 0, delay_s: float = 0.0, fail_start: bool = False,
        images: FakeImages | None = None, archive: bytes | None = None,
    ) -> None:
        self.containers = FakeContainers(fail_start, archive)
        self.api = FakeAPI(chunks or [], exit_code, delay_s)
        self.images = images or FakeImages()
        self.networks = FakeNetworks(bridge=True)


def _config(tmp_path: Path) -> SandboxConfig:
    return SandboxConfig(kind="docker", workspace=tmp_path / "ws", workdir="/app", timeout_s=30,
                         image="python:3.11-slim")


def test_execute_returns_observation_and_exit_code(tmp_path: Path) -> None:
    client = FakeClient([b"hello ", b"w\xc3", b"\xb6rld\n"], exit_code=3)
    with DockerSandbox(_config(tmp_path), client=client) as sb:
        assert "python:3.11-slim" in sb.isolation and "no network" in sb.isolation
        result = sb.execute("echo hello", timeout_s=5)
    assert result.output == "hello wörld\n"
    assert result.exit_code == 3 and not result.timed_out
    assert result.observation() == "hello wörld\n\n[exit_code=3]"
    container, argv, kwargs = client.api.execs[0]
    assert container == client.containers.created[0].id
    assert argv == exec_argv("echo hello", 5)
    assert kwargs["workdir"] == "/app"
    assert (tmp_path / "ws").is_dir()  # the workspace exists before it is mounted


def test_timeout_reports_exit_code_and_note(tmp_path: Path) -> None:
    client = FakeClient([b"partial"], exit_code=TIMEOUT_EXIT_CODE, delay_s=0.05)
    with DockerSandbox(_config(tmp_path), client=client) as sb:
        result = sb.execute("sleep 100", timeout_s=0.01)
    assert result.timed_out and result.exit_code == TIMEOUT_EXIT_CODE
    assert result.output == f"partial\n{timeout_note(0.01)}"


def test_exit_124_before_deadline_is_not_a_timeout(tmp_path: Path) -> None:
    client = FakeClient([], exit_code=124)
    with DockerSandbox(_config(tmp_path), client=client) as sb:
        result = sb.execute("exit 124", timeout_s=30)
    assert result.exit_code == 124 and not result.timed_out and result.output == ""


def test_large_output_is_bounded(tmp_path: Path) -> None:
    client = FakeClient([b"x" * 65536] * 100)
    with DockerSandbox(_config(tmp_path), client=client) as sb:
        result = sb.execute("yes x", timeout_s=5)
    assert result.elided_chars == 100 * 65536 - HEAD_CHARS - TAIL_CHARS
    assert len(result.output) < HEAD_CHARS + TAIL_CHARS + 100


def test_close_removes_exactly_once(tmp_path: Path) -> None:
    client = FakeClient()
    sb = DockerSandbox(_config(tmp_path), client=client)
    container = client.containers.created[0]
    assert container.started and container.id in live_container_ids()
    sb.close()
    sb.close()
    assert container.removals == [{"force": True}]
    assert container.id not in live_container_ids()
    with pytest.raises(SandboxUnavailable):
        sb.execute("true")


def test_exception_in_with_block_still_removes(tmp_path: Path) -> None:
    client = FakeClient()
    with pytest.raises(RuntimeError, match="boom"):
        with DockerSandbox(_config(tmp_path), client=client):
            raise RuntimeError("boom")
    assert client.containers.created[0].removals == [{"force": True}]


def test_start_failure_removes_container(tmp_path: Path) -> None:
    client = FakeClient(fail_start=True)
    with pytest.raises(SandboxUnavailable, match="cannot start a container"):
        DockerSandbox(_config(tmp_path), client=client)
    container = client.containers.created[0]
    assert container.removals == [{"force": True}]
    assert container.id not in live_container_ids()


def test_cleanup_all_and_signal_chain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    client = FakeClient()
    DockerSandbox(_config(tmp_path), client=client)  # never closed by its owner
    DockerSandbox(_config(tmp_path), client=client)
    seen: list[int] = []
    monkeypatch.setitem(ds._PREVIOUS_HANDLERS, signal.SIGTERM, lambda signum, frame: seen.append(signum))
    ds._on_signal(signal.SIGTERM, None)
    assert seen == [signal.SIGTERM]
    assert [c.removals for c in client.containers.created] == [[{"force": True}], [{"force": True}]]
    assert live_container_ids() == []



# ---------------------------------------------------------------- images built from a Dockerfile


def test_suites_image_is_built_once_from_the_shipped_dockerfile(tmp_path: Path) -> None:
    images = FakeImages()
    client = FakeClient(images=images)
    config = SandboxConfig(kind="docker", workspace=tmp_path / "ws", workdir="/app")  # no image, no build
    tag = f"unscaffold-env:{ds.context_hash(SUITES_IMAGE_DIR)}"
    with DockerSandbox(config, client=client) as sb:
        assert sb.config.image == tag and f"from image {tag}:" in sb.isolation
    with DockerSandbox(config.model_copy(update={"workspace": tmp_path / "ws2"}), client=client):
        pass
    assert [(b["path"], b["tag"]) for b in images.builds] == [(str(SUITES_IMAGE_DIR), tag)]  # built on first use only
    assert [c.kwargs["image"] for c in client.containers.created] == [tag, tag]
    dockerfile = (SUITES_IMAGE_DIR / "Dockerfile").read_text()
    assert "openpyxl" in dockerfile and "rdkit" in dockerfile


def test_task_dockerfile_is_built_and_cached_by_content(tmp_path: Path) -> None:
    env = tmp_path / "environment"
    env.mkdir()
    (env / "Dockerfile").write_text("FROM golang:1.22\nWORKDIR /app\nCOPY main.go .\n")
    (env / "main.go").write_text("package main\n")
    first = ds.context_hash(env)
    images = FakeImages()
    client = FakeClient(images=images)
    config = SandboxConfig(kind="docker", workspace=tmp_path / "ws", workdir="/app", build=env)
    assert ds.ensure_image(client, config) == f"unscaffold-env:{first}"
    assert ds.ensure_image(client, config) == f"unscaffold-env:{first}"
    (env / "main.go").write_text("package main // changed\n")
    second = ds.context_hash(env)
    assert second != first
    assert ds.ensure_image(client, config) == f"unscaffold-env:{second}"
    assert [b["tag"] for b in images.builds] == [f"unscaffold-env:{first}", f"unscaffold-env:{second}"]
    assert images.builds[0]["labels"] == {"unscaffold": "1"}


def test_failed_build_is_the_environments_error_with_the_log_tail(tmp_path: Path) -> None:
    from unscaffold.errors import EnvironmentBroken

    env = tmp_path / "environment"
    env.mkdir()
    (env / "Dockerfile").write_text("FROM golang:1.22\nRUN go build\n")
    log = [{"stream": "Step 2/2 : RUN go build\n"}, {"stream": "/bin/sh: 1: go: not found\n"}]
    client = FakeClient(images=FakeImages(build_log=log))
    with pytest.raises(EnvironmentBroken) as err:
        DockerSandbox(SandboxConfig(kind="docker", workspace=tmp_path / "ws", build=env), client=client)
    assert str(err.value) == (f"building the image from {env / 'Dockerfile'} failed: The command '/bin/sh -c go build' "
                              "returned a non-zero code: 127; the build ended: Step 2/2 : RUN go build | "
                              "/bin/sh: 1: go: not found")
    assert client.containers.created == []


def test_workspace_is_seeded_from_the_images_workdir(tmp_path: Path) -> None:
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in (("app/main.go", b"package main\n"), ("app/data/input.txt", b"42\n")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    client = FakeClient(archive=buffer.getvalue())
    config = SandboxConfig(kind="docker", workspace=tmp_path / "ws", workdir="/app", image="task:1",
                           seed_from_image=True)
    with DockerSandbox(config, client=client):
        assert (tmp_path / "ws" / "main.go").read_text() == "package main\n"
        assert (tmp_path / "ws" / "data" / "input.txt").read_text() == "42\n"
    holder, container = client.containers.created
    assert holder.kwargs["image"] == "task:1" and holder.removals == [{"force": True}]
    assert container.kwargs["volumes"][0] == f"{(tmp_path / 'ws').resolve()}:/app:rw"

SIGTERM_SCRIPT = """
import os, signal, sys, time
from pathlib import Path
from unscaffold.minimal_harness.sandbox.base import SandboxConfig
from unscaffold.minimal_harness.sandbox.docker_sandbox import DockerSandbox

marker = Path(sys.argv[1])

class Container:
    id = "c1"
    def start(self): pass
    def top(self): return {"Titles": ["PID"], "Processes": [["1"], ["2"]]}
    def remove(self, force=False): marker.write_text(f"removed force={force}")

class Containers:
    def create(self, **kwargs): return Container()
    def list(self, **kwargs): return []

class Client:
    containers = Containers()

DockerSandbox(SandboxConfig(kind="docker", workspace=marker.parent / "ws", image="python:3.11-slim"), client=Client())
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(5)
sys.exit(3)
"""


def test_sigterm_removes_containers_then_terminates(tmp_path: Path) -> None:
    marker = tmp_path / "removed"
    proc = subprocess.run(
        [sys.executable, "-c", SIGTERM_SCRIPT, str(marker)], capture_output=True, timeout=60, check=False
    )
    assert proc.returncode == -signal.SIGTERM, proc.stderr.decode()
    assert marker.read_text() == "removed force=True"


def test_unreachable_engine_raises_sandbox_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_engine(**kwargs: Any) -> Any:
        raise docker.errors.DockerException(
            "Error while fetching server API version: ('Connection aborted.',\n FileNotFoundError(2))"
        )

    monkeypatch.setattr(docker, "from_env", no_engine)
    with pytest.raises(SandboxUnavailable) as info:
        DockerSandbox(_config(tmp_path))
    message = str(info.value)
    assert "Docker is not reachable" in message and "--sandbox local" in message
    assert "\n" not in message


# ---------------------------------------------------------------- live, against a real engine

@pytest.fixture(scope="module")
def live_image(docker_suites_image: str) -> str:
    """UNSCAFFOLD_DOCKER_TEST_IMAGE where set, else the suites' image (made locally without a registry)."""
    return os.environ.get("UNSCAFFOLD_DOCKER_TEST_IMAGE", docker_suites_image)


@pytest.fixture(scope="module")
def live_client(docker_engine: docker.DockerClient, live_image: str) -> docker.DockerClient:
    try:
        docker_engine.images.get(live_image)
    except docker.errors.ImageNotFound:
        try:
            docker_engine.images.pull(live_image)
        except docker.errors.DockerException as e:
            pytest.skip(f"image {live_image} unavailable: {e}")
    return docker_engine


def _live_config(tmp_path: Path, image: str, **kw: Any) -> SandboxConfig:
    return SandboxConfig(kind="docker", workspace=tmp_path / "ws", workdir="/app", image=image, **kw)


@pytest.mark.docker
def test_live_workspace_writable_rest_not(live_client: docker.DockerClient, live_image: str,
                                           tmp_path: Path) -> None:
    secret = tmp_path / "outside.txt"
    secret.write_text("host only")
    with DockerSandbox(_live_config(tmp_path, live_image), client=live_client) as sb:
        r = sb.execute("pwd; echo hi > made.txt; cat made.txt")
        assert r.exit_code == 0 and r.output == "/app\nhi\n"
        assert (tmp_path / "ws" / "made.txt").read_text() == "hi\n"
        assert sb.execute(f"test -e {secret}").exit_code != 0  # host files outside the workspace are absent
        # Whatever a write outside the workspace does inside the container, it never reaches the host.
        sb.execute(f"mkdir -p {tmp_path}/leak && echo x > {tmp_path}/leak/f")
        assert sb.execute("python -c 'import urllib.request as u; u.urlopen(\"http://1.1.1.1\", timeout=3)'").exit_code
    assert not (tmp_path / "leak").exists()


@pytest.mark.docker
def test_live_timeout_kills(live_client: docker.DockerClient, live_image: str, tmp_path: Path) -> None:
    with DockerSandbox(_live_config(tmp_path, live_image), client=live_client) as sb:
        r = sb.execute("echo begin; sleep 300 & sleep 300", timeout_s=1)
        assert r.timed_out and r.exit_code == TIMEOUT_EXIT_CODE
        assert r.output == f"begin\n{timeout_note(1)}"
        left = sb.execute("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -c 'slee[p] 300' || true")
        assert left.output.strip() == "0"


@pytest.mark.docker
def test_live_container_gone_after_close(live_client: docker.DockerClient, live_image: str,
                                         tmp_path: Path) -> None:
    sb = DockerSandbox(_live_config(tmp_path, live_image), client=live_client)
    container_id = sb.container.id
    assert live_client.containers.get(container_id).labels.get("unscaffold") == "1"
    sb.close()
    with pytest.raises(docker.errors.NotFound):
        live_client.containers.get(container_id)
