"""`docker`: one container per trial, commands run through `docker exec`; the container is always removed.

After every command (and so before scoring) every process of the container but its init and its keeper
is ended. Where the engine runs on this host (as root, in its pid namespace) the container's own cgroup is
read, frozen (so nothing forks meanwhile), its processes killed and thawed from here, with no request to
the engine; otherwise the container is paused, its processes are listed by the engine (`docker top`) and
killed from the host, then it is thawed; where the host cannot reach the container's processes (an engine
elsewhere) or some will not end, the container is restarted instead. A daemon a command left
(`setsid`, a double fork) never outlives the command. Disk: the root is read-only, /tmp, /var/tmp and /run
are sized tmpfs, and the workspace and writable mounts are on the trial's own filesystem (see
`disk.open_trial_disk`) where the engine shares this host's mounts."""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import io
import json
import logging
import os
import signal
import tarfile
import tempfile
import threading
import time
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

import docker
import docker.errors
from docker.types import Ulimit

from unscaffold.errors import EnvironmentBroken, SandboxUnavailable
from unscaffold.minimal_harness.sandbox import owner
from unscaffold.minimal_harness.sandbox.base import SUITES_IMAGE_DIR, ExecResult, SandboxConfig
from unscaffold.minimal_harness.sandbox.cgroup import SandboxCgroup
from unscaffold.minimal_harness.sandbox.identity import allocate_uid, hand_back, hand_over, release_uid
from unscaffold.minimal_harness.sandbox.local import sandbox_env
from unscaffold.minimal_harness.sandbox.output import OutputCollector
from unscaffold.minimal_harness.sandbox.stream import TIMEOUT_EXIT_CODE, finish_output
from unscaffold.offline import images

log = logging.getLogger(__name__)
LABELS = {"unscaffold": "1"}
OWNER_LABEL = "unscaffold.owner"  # the token (pid.start) of the process that made the container
_SETTLE_S = 5.0  # how long killed processes may take to leave the container before it is restarted
KEEPERS = 2  # processes a container runs between commands: its init (`init: True`) and `sleep infinity`
UNREACHABLE_HINT = "start the Docker engine (or fix DOCKER_HOST), or pass `--sandbox local`"
# If the in-container watchdog fails (a process escaped the group and holds the output open),
# the host stops reading this long after the deadline.
BACKSTOP_GRACE_S = 10.0

# Runs inside the container: $1 = deadline in seconds, $2 = the command.
# The command gets its own session (so its own process group); a watchdog kills that group at the
# deadline; whatever the command left running in its group is killed when it returns. Exit 124 means
# the watchdog fired. SIGXFSZ is ignored (inherited) so a write past the size limit fails with EFBIG.
EXEC_WRAPPER = """trap '' XFSZ
setsid bash -c "$2" & pid=$!
(
  trap 'kill "$s" 2>/dev/null; exit 0' TERM
  sleep "$1" & s=$!
  wait "$s"
  trap '' TERM
  kill -KILL -- "-$pid" 2>/dev/null
  exit 3
) & dog=$!
wait "$pid" 2>/dev/null; rc=$?
kill -KILL -- "-$pid" 2>/dev/null
kill -TERM "$dog" 2>/dev/null
wait "$dog"; [ $? -eq 3 ] && exit 124
exit "$rc"
"""


IMAGE_REPOSITORY = "unscaffold-env"  # images built from a folder are tagged with the folder's content hash


def context_hash(folder: Path, substitutes: dict[str, str] | None = None) -> str:
    """A hash of every file's relative path and bytes (and of any `FROM` substitutes): the same folder
    builds the same image."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):  # links: never read
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    if substitutes:
        digest.update(json.dumps(substitutes, sort_keys=True).encode())
    return digest.hexdigest()[:16]


_BUILD_LOCKS: dict[str, threading.Lock] = {}
_BUILD_LOCKS_GUARD = threading.Lock()
_SAID: set[str] = set()
# The registry image tag -> the local stand-in chosen for it (asked once per process, while it exists).
_STAND_INS: dict[str, tuple[str, str]] = {}


def _say_once(message: str) -> None:
    """A notice on stderr (through logging's last resort when nothing is configured), once per process."""
    with _BUILD_LOCKS_GUARD:
        if message in _SAID:
            return
        _SAID.add(message)
    log.warning("%s", message)


def ensure_image(client: Any, config: SandboxConfig) -> str:
    """The image to run (see `resolve_image`)."""
    return resolve_image(client, config)[0]


def resolve_image(client: Any, config: SandboxConfig) -> tuple[str, str | None]:
    """(the image to run, a note when it stands in for another). `config.image` (or its `--base-image`
    substitute), else the image built from `config.build` or the suites' image folder, built once and
    then found by its tag. A `FROM` that cannot be pulled: the suites' image is built locally instead
    (`images.local_suites_image`); a task's needs an explicit substitute. A failed build is the
    environment's fault."""
    substitutes = config.base_images
    if config.image:
        if config.image in substitutes:
            return substitutes[config.image], f"substitute base {substitutes[config.image]} for {config.image}"
        return config.image, None
    folder = Path(config.build or SUITES_IMAGE_DIR).resolve()
    dockerfile = folder / "Dockerfile"
    if not dockerfile.is_file():
        raise EnvironmentBroken(f"{folder}: no Dockerfile to build the sandbox image from")
    text = dockerfile.read_text(encoding="utf-8", errors="replace")
    used = {image: local for image, local in substitutes.items() if image in images.from_images(text)}
    tag = f"{IMAGE_REPOSITORY}:{context_hash(folder, used)}"
    note = "; ".join(f"substitute base {local} for {image}" for image, local in used.items()) or None
    with _BUILD_LOCKS_GUARD:
        lock = _BUILD_LOCKS.setdefault(tag, threading.Lock())
    with lock:  # trials of one run that need the same image wait for one build
        if tag in _STAND_INS and images.have_image(client, _STAND_INS[tag][0]):
            return _STAND_INS[tag]
        if images.have_image(client, tag):
            return tag, note
        for image in images.from_images(text):
            problem = None if image in used else images.pull_problem(client, image)
            if problem is None:
                continue
            if folder == SUITES_IMAGE_DIR.resolve():
                _say_once(f"{image} cannot be pulled ({problem}): the built-in suites run on the suites' image "
                          "built from this machine's Debian mirror (`unscaffold image suites`)")
                local = images.local_suites_image(client, say=_say_once)
                _STAND_INS[tag] = (local, f"built locally: {image} cannot be pulled")
                return _STAND_INS[tag]
            raise SandboxUnavailable(f"{dockerfile}: FROM {image} cannot be pulled ({problem}); map it to a local "
                                     f"image with --base-image {image}=LOCAL_IMAGE (`unscaffold image base` "
                                     "makes one)")
        with tempfile.TemporaryDirectory(prefix="unscaffold-dockerfile-") as scratch:
            rewritten = None
            if used:
                rewritten = Path(scratch) / "Dockerfile"
                rewritten.write_text(images.substitute_from(text, used))
            images.build_image(client, folder, tag, dockerfile, dockerfile=rewritten)
    return tag, note


def owned_labels() -> dict[str, str]:
    """The labels of every container made here: found with `docker ps -a --filter label=unscaffold`, and
    its owner told, so that a later process removes what a killed one left."""
    return {**LABELS, OWNER_LABEL: owner.token()}


def remove_stale_containers(client: Any) -> list[str]:
    """Remove the containers whose owning process is gone (their ids): a killed run cannot remove its own,
    and their processes would keep their uids taken."""
    try:
        found = client.containers.list(all=True, filters={"label": "unscaffold=1"})
    except docker.errors.DockerException as e:
        log.debug("listing containers: %s", e)
        return []
    removed = []
    for container in found:
        token = (getattr(container, "labels", None) or {}).get(OWNER_LABEL)
        if token is None or owner.alive(token):
            continue
        try:
            container.remove(force=True)
            removed.append(container.id)
        except docker.errors.DockerException as e:
            log.debug("removing stale container %s: %s", container.id, e)
    return removed


_SWEPT: set[int] = set()  # pids that have removed stale containers (once per process)


def seed_workspace(client: Any, image: str, workdir: str, workspace: Path) -> None:
    """Copy the image's `workdir` into the (bind-mounted, so otherwise hiding it) workspace."""
    holder = client.containers.create(image=image, command=["true"], labels=owned_labels())
    try:
        try:
            chunks, _ = holder.get_archive(workdir)
        except docker.errors.NotFound:
            return
        with tarfile.open(fileobj=io.BytesIO(b"".join(chunks))) as tar:
            members = []
            for member in tar.getmembers():
                _, _, rest = member.name.partition("/")
                if rest:
                    member.name = rest
                    members.append(member)
            tar.extractall(workspace, members=members, filter="data")
    finally:
        holder.remove(force=True)


def container_kwargs(config: SandboxConfig, uid: int | None = None) -> dict[str, Any]:
    """The keyword arguments for `client.containers.create`/`run`: pure, so the isolation is testable
    without an engine. Never root inside: `uid` (the sandbox's own, when the host is root) or the host
    user; no capabilities, no privilege gain, pids, memory and file-size limits."""
    workspace = str(Path(config.workspace).resolve())
    volumes = [f"{workspace}:{config.cwd}:rw"]
    for m in config.mounts:
        volumes.append(f"{Path(m.source).resolve()}:{m.target}:{'rw' if m.writable else 'ro'}")
    env = sandbox_env(config)
    if "PATH" not in config.env:  # the image's own PATH (its ENV), not the host's virtualenv
        del env["PATH"]
    limits = config.limits
    kwargs: dict[str, Any] = {
        "image": config.image or "",
        "command": ["sleep", "infinity"],
        "detach": True,
        "init": True,
        "labels": owned_labels(),
        "working_dir": config.cwd,
        "volumes": volumes,
        "environment": env,
        "mem_limit": limits.memory_bytes,
        "memswap_limit": limits.memory_bytes,
        "pids_limit": limits.processes,
        "ulimits": [Ulimit(name="fsize", soft=limits.file_size_bytes, hard=limits.file_size_bytes)],
        "user": f"{uid}:{uid}" if uid is not None else f"{os.getuid()}:{os.getgid()}",
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "read_only": True,  # nothing outside the workspace and the sized tmpfs below takes a byte of disk
        "tmpfs": {"/tmp": f"size={limits.tmp_bytes},mode=1777", "/var/tmp": f"size={limits.var_bytes},mode=1777",
                  "/run": f"size={limits.var_bytes},mode=755"},
        "stdin_open": False,
        "tty": False,
    }
    if not config.network:
        kwargs["network_mode"] = "none"
    return kwargs


def exec_argv(command: str, timeout_s: float) -> list[str]:
    """The argv given to `docker exec`: the command in its own process group under a deadline."""
    return ["bash", "-c", EXEC_WRAPPER, "unscaffold-exec", f"{max(timeout_s, 0.001):.3f}", command]


# ---- every live container, removed at exit or on SIGTERM/SIGINT even if nobody calls close() ----

_LIVE: dict[str, DockerSandbox] = {}
_REGISTRY_LOCK = threading.RLock()  # re-entrant: a signal handler may run while it is held
_HOOKS_INSTALLED = False
_PREVIOUS_HANDLERS: dict[int, Any] = {}


def cleanup_all() -> None:
    """Remove every container this process still holds; safe to call more than once."""
    with _REGISTRY_LOCK:
        sandboxes = list(_LIVE.values())
    for sandbox in sandboxes:
        sandbox.close()


def _on_signal(signum: int, frame: FrameType | None) -> None:
    cleanup_all()
    previous = _PREVIOUS_HANDLERS.get(signum, signal.SIG_DFL)
    if callable(previous):
        previous(signum, frame)
    elif previous is None or previous == signal.SIG_DFL:  # None: a handler not set from Python
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    # SIG_IGN: the process chose to ignore it; the containers are gone anyway.


def _install_hooks() -> None:
    global _HOOKS_INSTALLED
    if _HOOKS_INSTALLED:
        return
    _HOOKS_INSTALLED = True
    atexit.register(cleanup_all)
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be set from the main thread; atexit still covers normal exits
    for signum in (signal.SIGTERM, signal.SIGINT):
        try:
            _PREVIOUS_HANDLERS[signum] = signal.getsignal(signum)
            signal.signal(signum, _on_signal)
        except (ValueError, OSError):
            pass


def _register(sandbox: DockerSandbox, container_id: str) -> None:
    with _REGISTRY_LOCK:
        _install_hooks()
        _LIVE[container_id] = sandbox


def _unregister(container_id: str) -> None:
    with _REGISTRY_LOCK:
        _LIVE.pop(container_id, None)


def live_container_ids() -> list[str]:
    """Containers created by this process and not yet removed (for tests and diagnostics)."""
    with _REGISTRY_LOCK:
        return list(_LIVE)


def _one_line(e: BaseException, limit: int = 200) -> str:
    return " ".join(str(e).split())[:limit] or type(e).__name__


def _close_quietly(stream: Any) -> None:
    """Closing the exec stream is how the host gives up on it; a stream already at its end may object."""
    close = getattr(stream, "close", None)
    if close is None:
        return
    try:
        close()
    except Exception as e:  # the SDK reaches into urllib3 internals that may already be torn down
        log.debug("closing exec stream: %s", e)


def connect() -> docker.DockerClient:
    """A client for the engine the environment names; a one-line SandboxUnavailable when none answers."""
    try:
        client = docker.from_env()
        client.ping()
    except Exception as e:  # the SDK raises DockerException, requests and socket errors alike
        raise SandboxUnavailable(f"Docker is not reachable ({_one_line(e)}): {UNREACHABLE_HINT}") from None
    return client


class DockerSandbox:
    """One container per trial: started on construction, every command a `docker exec`, removed on close."""

    def __init__(self, config: SandboxConfig, client: docker.DockerClient | None = None) -> None:
        self.config = config
        self.client = client if client is not None else connect()
        self.container: Any = None
        self._closed = False
        self._close_lock = threading.RLock()
        self.uid: int | None = None
        self._keep: set[int] = set()  # the container's init and keeper, as the engine lists them
        self._group: SandboxCgroup | None = None  # the container's own cgroup, where this host can freeze it
        self.restarts = 0  # times leftover processes would not end and the container was restarted
        image, note = resolve_image(self.client, config)
        self.config = config = config.model_copy(update={"image": image})
        net = "network on" if config.network else "no network"
        disk = ("the workspace on the trial's own filesystem" if os.path.ismount(config.workspace)
                else "the workspace's disk not bounded (no filesystem of the trial's own: not root, or the engine "
                     "does not share this host's mounts)")
        self.isolation = (f"docker container from image {image}" + (f" ({note})" if note else "")
                          + f": writable workspace at {config.cwd}, read-only root, own pids, {net}; every process "
                            f"a command left is ended after it; {disk}")
        Path(config.workspace).mkdir(parents=True, exist_ok=True)
        if os.getpid() not in _SWEPT:  # before a uid is taken: a stale container keeps its uid in use
            _SWEPT.add(os.getpid())
            remove_stale_containers(self.client)
        self.uid = allocate_uid()
        try:
            if config.seed_from_image:
                seed_workspace(self.client, image, config.cwd, Path(config.workspace))
            self.hand_over_writable()
            self.container = self._create(container_kwargs(config, self.uid))
            _register(self, self.container.id)
            self.container.start()
            self._keep = self._keeper_pids()
            self._group = self._own_group()
        except BaseException as e:
            self.close()
            if isinstance(e, docker.errors.DockerException):
                raise SandboxUnavailable(f"cannot start a container from {image}: {_one_line(e)}") from None
            raise

    def _create(self, kwargs: dict[str, Any]) -> Any:
        """Create (not run): a start failure then leaves us the object to remove."""
        try:
            return self.client.containers.create(**kwargs)
        except docker.errors.ImageNotFound:
            problem = images.pull_problem(self.client, kwargs["image"])
            if problem is not None:
                raise SandboxUnavailable(f"the image {kwargs['image']} cannot be pulled ({problem}); map it to a "
                                         f"local image with --base-image {kwargs['image']}=LOCAL_IMAGE") from None
            return self.client.containers.create(**kwargs)

    def execute(self, command: str, timeout_s: float | None = None) -> ExecResult:
        """Run one command; output streams into a bounded collector, stdout and stderr merged. Every process
        it left is ended before this returns (or raises)."""
        if self._closed or self.container is None:
            raise SandboxUnavailable("the docker sandbox is closed")
        try:
            return self._execute(command, timeout_s)
        finally:
            self.end_leftovers()

    def _pids(self) -> set[int]:
        """The container's processes as the engine lists them (pids of the engine's host)."""
        try:
            listing = self.container.top()
        except docker.errors.DockerException as e:
            raise SandboxUnavailable(f"docker top failed: {_one_line(e)}") from None
        column = listing["Titles"].index("PID")
        return {int(row[column]) for row in listing.get("Processes") or []}

    def _ours(self, pid: int) -> bool:
        """Whether host pid `pid` is a process of this container (an engine on another host lists pids
        that mean other processes here)."""
        try:
            return self.container.id in Path(f"/proc/{pid}/cgroup").read_text()
        except OSError:
            return False

    def end_leftovers(self) -> None:
        """End every process but the container's init and keeper: the container is frozen while they are
        killed from the host, so none forks away. Where one cannot be killed from here or will not end,
        the container is restarted (which ends them all; /tmp starts empty again)."""
        if self._closed or self.container is None:
            return
        if self._group is not None:  # listed, frozen and killed through its cgroup, no request to the engine
            if not self._group.kill_except(self._keep):
                self._restart()
            return
        if self._pids() <= self._keep:
            return
        container = self.container
        reachable = True
        try:
            container.pause()
        except docker.errors.DockerException as e:
            log.debug("pausing %s: %s", container.id, e)
            reachable = False
        else:
            try:
                for pid in self._pids() - self._keep:
                    if not self._ours(pid):
                        reachable = False
                        continue
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
            finally:
                container.unpause()
        end = time.monotonic() + _SETTLE_S
        while reachable and not self._pids() <= self._keep:
            if time.monotonic() > end:
                reachable = False
                break
            time.sleep(0.01)
        if not reachable:
            self._restart()

    def _keeper_pids(self) -> set[int]:
        """The processes of a container no command has run in yet: its init and the keeper it starts (both
        listed once the keeper is running)."""
        end = time.monotonic() + _SETTLE_S
        while len(pids := self._pids()) < KEEPERS and time.monotonic() < end:
            time.sleep(0.01)
        if len(pids) != KEEPERS:
            raise SandboxUnavailable(f"the container started {len(pids)} processes, not its init and keeper")
        return pids

    def _restart(self) -> None:
        try:
            self.container.restart(timeout=0)
        except docker.errors.DockerException as e:
            raise SandboxUnavailable(f"could not end the processes a command left: {_one_line(e)}") from None
        self.restarts += 1
        self._keep = self._keeper_pids()
        self._group = self._own_group()

    def _own_group(self) -> SandboxCgroup | None:
        """The container's own cgroup where this host can read and freeze it (the engine runs here, as root,
        in this pid namespace: the group lists exactly the pids the engine gave for the init and keeper)."""
        for pid in sorted(self._keep):
            group = SandboxCgroup.of_process(pid, self.container.id)
            if group is not None and group.procs() == self._keep:
                return group
        return None

    def _execute(self, command: str, timeout_s: float | None) -> ExecResult:
        timeout = timeout_s or self.config.timeout_s
        api = self.client.api
        start = time.monotonic()
        try:
            argv = exec_argv(command, timeout)
            exec_id = api.exec_create(self.container.id, argv, stdout=True, stderr=True, workdir=self.config.cwd)["Id"]
            stream = api.exec_start(exec_id, stream=True, demux=False)
        except docker.errors.DockerException as e:
            raise SandboxUnavailable(f"docker exec failed: {_one_line(e)}") from None
        collector = OutputCollector()
        cancelled = threading.Event()

        def backstop() -> None:
            cancelled.set()
            _close_quietly(stream)

        timer = threading.Timer(timeout + BACKSTOP_GRACE_S, backstop)
        timer.daemon = True
        timer.start()
        try:
            for chunk in stream:
                if chunk:
                    collector.feed(chunk)
        except (OSError, docker.errors.DockerException) as e:
            if not cancelled.is_set():
                raise SandboxUnavailable(f"docker exec output broke off: {_one_line(e)}") from None
        finally:
            timer.cancel()
            _close_quietly(stream)
        duration = time.monotonic() - start
        code = TIMEOUT_EXIT_CODE
        if not cancelled.is_set():
            try:
                info = api.exec_inspect(exec_id)
            except docker.errors.DockerException as e:
                raise SandboxUnavailable(f"docker exec failed: {_one_line(e)}") from None
            code = info.get("ExitCode")
            code = TIMEOUT_EXIT_CODE if code is None else int(code)
        # The wrapper exits 124 only when its watchdog fired, which cannot happen before the deadline.
        timed_out = cancelled.is_set() or (code == TIMEOUT_EXIT_CODE and duration >= timeout)
        return ExecResult(
            output=finish_output(collector.text(), timed_out, timeout),
            exit_code=code,
            timed_out=timed_out,
            elided_chars=collector.elided_chars,
            duration_s=duration,
        )

    def hand_over_writable(self) -> None:
        """The workspace and writable mounts belong to the container's user (no process of it runs
        meanwhile: the scorer calls this after copying the tests in)."""
        self.end_leftovers()
        hand_over(self.config, self.uid)

    def close(self) -> None:
        """Remove the container (force): idempotent, and safe to call from a signal handler or atexit. The
        uid is given back only once the container is gone and its files are the host user's again; a
        container that could not be removed keeps it (a later process removes the container and reclaims
        the uid once this one has ended)."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
            container, uid = self.container, self.uid
        gone = True
        if container is not None:
            try:
                container.remove(force=True)
            except docker.errors.NotFound:
                pass
            except Exception as e:  # best effort; the label lets `docker ps -a --filter label=unscaffold` find it
                gone = False
                log.warning("could not remove container %s: %s", getattr(container, "id", "?"), e)
            finally:
                _unregister(container.id)
        if gone and uid is not None:
            hand_back(self.config, uid)
            release_uid(uid)

    def __enter__(self) -> DockerSandbox:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
