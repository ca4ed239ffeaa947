"""Images for `--sandbox docker` without an image registry: a base system made from the machine's own
Debian mirror (debootstrap, then import), the suites' image built on it with the package index, and a
task Dockerfile's unpullable `FROM` mapped to a local image. Every image is tagged by the hash of what
made it, so each is built once."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker.errors
from pydantic import BaseModel, Field

from unscaffold.errors import EnvironmentBroken, SandboxUnavailable

log = logging.getLogger(__name__)
Say = Callable[[str], None]

BASE_REPOSITORY = "unscaffold-base"
SUITES_REPOSITORY = "unscaffold-suites"
LABELS = {"unscaffold": "1"}
RECIPE_VERSION = 1  # bump when the way the base is made changes, so a new tag is built
BENCHMARKS_DIR = Path(__file__).resolve().parents[1] / "benchmarks"
LOCAL_SUITES_DIR = BENCHMARKS_DIR / "image" / "local"
REQUIREMENT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*((?:[<>=!~]=?[^,\s]+,?)*)$")
APT_SOURCES = Path("/etc/apt")
OS_RELEASE = Path("/etc/os-release")
BUILD_LOG_TAIL = 6


class BaseRecipe(BaseModel):
    """What makes the base image: its tag is the hash of these fields."""

    suite: str = Field(description="Debian release codename, e.g. bookworm")
    mirror: str = Field(description="Debian mirror URL the system is fetched from")
    variant: str = "minbase"
    version: int = RECIPE_VERSION

    @property
    def tag(self) -> str:
        return f"{BASE_REPOSITORY}:{_digest(self.model_dump_json().encode())}"


class SuitesBuild(BaseModel):
    """What makes the suites' image on a base: the Dockerfile, the CA bundle pip trusts, the build args."""

    dockerfile: str
    ca_bundle: bytes
    buildargs: dict[str, str]

    @property
    def tag(self) -> str:
        parts = [self.dockerfile.encode(), self.ca_bundle, json.dumps(self.buildargs, sort_keys=True).encode()]
        return f"{SUITES_REPOSITORY}:{_digest(b''.join(hashlib.sha256(p).digest() for p in parts))}"


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def _one_line(e: BaseException, limit: int = 300) -> str:
    return " ".join(str(e).split())[:limit] or type(e).__name__


# ---------------------------------------------------------------- the machine's Debian mirror


def _deb822_entries(text: str) -> list[dict[str, str]]:
    entries: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in text.splitlines() + [""]:
        if not line.strip():
            if current:
                entries.append(current)
            current = {}
        elif not line.startswith("#") and ":" in line and not line[0].isspace():
            key, _, value = line.partition(":")
            current[key.strip().lower()] = value.strip()
    return entries


def apt_sources(root: Path = APT_SOURCES) -> list[tuple[str, list[str], list[str]]]:
    """(URI, suites, components) of every `deb` source, from sources.list and sources.list.d."""
    out: list[tuple[str, list[str], list[str]]] = []
    one_line = [root / "sources.list"] + sorted((root / "sources.list.d").glob("*.list"))
    for path in one_line:
        if not path.is_file():
            continue
        for line in path.read_text(errors="replace").splitlines():
            words = re.sub(r"\[[^]]*\]", " ", line.split("#", 1)[0]).split()
            if len(words) >= 3 and words[0] == "deb":
                out.append((words[1], [words[2]], words[3:]))
    for path in sorted((root / "sources.list.d").glob("*.sources")):
        for entry in _deb822_entries(path.read_text(errors="replace")):
            if "deb" in entry.get("types", "").split() and entry.get("enabled", "yes") != "no":
                for uri in entry.get("uris", "").split():
                    out.append((uri, entry.get("suites", "").split(), entry.get("components", "").split()))
    return out


def host_codename(os_release: Path = OS_RELEASE) -> str | None:
    if not os_release.is_file():
        return None
    for line in os_release.read_text(errors="replace").splitlines():
        key, _, value = line.partition("=")
        if key == "VERSION_CODENAME" and value.strip().strip('"'):
            return value.strip().strip('"')
    return None


def base_recipe(mirror: str | None = None, suite: str | None = None, root: Path = APT_SOURCES,
                os_release: Path = OS_RELEASE) -> BaseRecipe:
    """The machine's own release and the mirror its apt uses for it (the main archive, not updates or
    security), unless given."""
    suite = suite or host_codename(os_release)
    if mirror is None:
        for uri, suites, components in apt_sources(root):
            if uri.startswith(("http://", "https://")) and "main" in components and (suite in suites if suite
                                                                                     else True):
                mirror, suite = uri, suite or suites[0]
                break
    if not suite or not mirror:
        raise SandboxUnavailable(f"{root}: no Debian mirror for {suite or 'this release'} among the apt sources; "
                                 "pass --mirror URL (and --suite NAME)")
    return BaseRecipe(suite=suite, mirror=mirror.rstrip("/"))


# ---------------------------------------------------------------- building


_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def _lock(tag: str) -> threading.Lock:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(tag, threading.Lock())


def have_image(client: Any, tag: str) -> bool:
    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False
    except docker.errors.DockerException as e:
        raise SandboxUnavailable(f"docker image lookup failed: {_one_line(e)}") from None


def build_base(client: Any, recipe: BaseRecipe, say: Say = log.info) -> str:
    """The base image for `recipe`: found by its tag, else made with debootstrap and imported."""
    tag = recipe.tag
    with _lock(tag):
        if have_image(client, tag):
            return tag
        debootstrap = shutil.which("debootstrap")
        if debootstrap is None or os.geteuid() != 0:
            raise SandboxUnavailable(
                f"the base image {tag} is not built and building it needs root and debootstrap "
                "(`apt-get install -y debootstrap`, then `sudo unscaffold image base`)")
        started = time.monotonic()
        rootfs = Path(tempfile.mkdtemp(prefix="unscaffold-rootfs-"))
        try:
            say(f"debootstrap --variant={recipe.variant} {recipe.suite} from {recipe.mirror} ...")
            done = subprocess.run([debootstrap, f"--variant={recipe.variant}", recipe.suite, str(rootfs),
                                   recipe.mirror], capture_output=True, text=True)
            if done.returncode != 0:
                tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-3:])
                raise SandboxUnavailable(f"debootstrap {recipe.suite} from {recipe.mirror} failed: {tail[-500:]}")
            for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):  # fetched again by any image built on it
                for path in (rootfs / junk).glob("*"):
                    if path.is_file():
                        path.unlink()
            say(f"importing {tag} ...")
            _import(client, rootfs, tag, recipe)
        finally:
            shutil.rmtree(rootfs, ignore_errors=True)
        say(f"built {tag} in {time.monotonic() - started:.0f} s")
    return tag


def _import(client: Any, rootfs: Path, tag: str, recipe: BaseRecipe) -> None:
    repository, _, name = tag.partition(":")
    changes = [f"LABEL unscaffold=1 unscaffold.recipe={recipe.suite}@{recipe.mirror}", 'CMD ["bash"]']
    tar = subprocess.Popen(["tar", "--numeric-owner", "-C", str(rootfs), "-cf", "-", "."],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        answer = client.api.import_image(src=tar.stdout, repository=repository, tag=name, changes=changes,
                                         stream_src=True)
    except docker.errors.DockerException as e:
        raise SandboxUnavailable(f"docker could not import {tag}: {_one_line(e)}") from None
    finally:
        assert tar.stdout is not None and tar.stderr is not None
        tar.stdout.close()
        error = tar.stderr.read().decode(errors="replace")
        tar.stderr.close()
        if tar.wait() != 0:
            raise SandboxUnavailable(f"tar of the base system failed: {_one_line(RuntimeError(error))}")
    if not have_image(client, tag):  # the engine reports a failed import in its answer, not as an error
        raise SandboxUnavailable(f"docker could not import {tag}: {_one_line(RuntimeError(str(answer)))}")


def suite_libraries(files: list[Path] | None = None) -> dict[str, str]:
    """The libraries the suites' tasks and h* tools import inside the sandbox, name -> lower bound: the
    union of the requirement files (pip's format, one `NAME>=VERSION` a line, `#` comments); default: the
    one each registered suite's folder declares (`image` in its suite.toml)."""
    if files is None:
        from unscaffold.suites import entries

        files = [e.image for e in entries() if e.image is not None]
    out: dict[str, str] = {}
    for path in files:
        for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            line = raw.partition("#")[0].strip()
            if not line:
                continue
            match = REQUIREMENT.match(line)
            if match is None:
                raise EnvironmentBroken(f"{path}: line {number}: not a requirement (NAME>=VERSION): {line!r}")
            name, spec = match.group(1).lower(), match.group(2)
            if out.get(name, spec) != spec:
                raise EnvironmentBroken(f"{path}: line {number}: {name} is also required as {name}{out[name]}")
            out[name] = spec
    return out


def suite_requirements() -> list[str]:
    """Each suite library pinned to the version this environment has (its lower bound where absent)."""
    out = []
    for name, spec in suite_libraries().items():
        try:
            out.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            out.append(f"{name}{spec}")
    return out


def host_pip() -> tuple[str | None, Path | None]:
    """The package index and the CA bundle the host's pip uses (its environment and config files), so a
    build reaches the same index through the same TLS setup; a `file:` index does not reach a build."""
    settings: dict[str, str] = {}
    done = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True)
    for line in done.stdout.splitlines():
        key, _, value = line.partition("=")
        settings[key.rsplit(".", 1)[-1]] = value.strip().strip("'\"")
    index = os.environ.get("PIP_INDEX_URL") or settings.get("index-url")
    cert = os.environ.get("PIP_CERT") or settings.get("cert")
    index = index if index and index.startswith(("http://", "https://")) else None
    return index, Path(cert) if cert and Path(cert).is_file() else None


def suites_build(base: str) -> SuitesBuild:
    index, cert = host_pip()
    args = {"BASE": base, "REQUIREMENTS": " ".join(suite_requirements())}
    if index:
        args["PIP_INDEX_URL"] = index
    return SuitesBuild(dockerfile=(LOCAL_SUITES_DIR / "Dockerfile").read_text(),
                       ca_bundle=cert.read_bytes() if cert else b"", buildargs=args)


def build_network(client: Any) -> str | None:
    """`host` for a build's RUN steps when the engine has no bridge network (a daemon started with
    `--bridge=none` gives them none otherwise); the engine's default where it has one."""
    try:
        return None if client.networks.list(names=["bridge"]) else "host"
    except docker.errors.DockerException:
        return None


def build_suites(client: Any, base: str, say: Say = log.info) -> str:
    """The suites' image on `base`: found by its tag, else built (about a minute and a half)."""
    plan = suites_build(base)
    tag = plan.tag
    with _lock(tag):
        if have_image(client, tag):
            return tag
        started = time.monotonic()
        say(f"building {tag} on {base} ({plan.buildargs['REQUIREMENTS']}) ...")
        with tempfile.TemporaryDirectory(prefix="unscaffold-suites-") as context:
            (Path(context) / "Dockerfile").write_text(plan.dockerfile)
            (Path(context) / "build-ca.pem").write_bytes(plan.ca_bundle)
            build_image(client, Path(context), tag, LOCAL_SUITES_DIR / "Dockerfile", buildargs=plan.buildargs)
        say(f"built {tag} in {time.monotonic() - started:.0f} s")
    return tag


def build_image(client: Any, context: Path, tag: str, named: Path, dockerfile: Path | None = None,
                buildargs: dict[str, str] | None = None) -> None:
    """One `docker build`; a failed build is an EnvironmentBroken naming `named` and the log's tail."""
    kwargs: dict[str, Any] = {"path": str(context), "tag": tag, "rm": True, "labels": dict(LABELS)}
    if dockerfile is not None:
        kwargs["dockerfile"] = str(dockerfile)
    if buildargs:
        kwargs["buildargs"] = buildargs
    network = build_network(client)
    if network:
        kwargs["network_mode"] = network
    try:
        client.images.build(**kwargs)
    except docker.errors.BuildError as e:
        lines = [str(entry.get("stream") or entry.get("error") or "").strip() for entry in e.build_log or []
                 if isinstance(entry, dict)]
        tail = " | ".join([line for line in lines if line][-BUILD_LOG_TAIL:])
        raise EnvironmentBroken(f"building the image from {named} failed: {_one_line(e, 200)}"
                                + (f"; the build ended: {tail[-600:]}" if tail else "")) from None
    except docker.errors.DockerException as e:
        raise SandboxUnavailable(f"docker could not build {named}: {_one_line(e, 200)}") from None


def local_suites_image(client: Any, say: Say = log.info) -> str:
    """The suites' image built without a registry: the base from this machine's mirror, then the suites'."""
    return build_suites(client, build_base(client, base_recipe(), say), say)


# ---------------------------------------------------------------- a Dockerfile's FROM lines

FROM_LINE = re.compile(r"^(\s*FROM\s+)((?:--\S+\s+)*)(\S+)(.*)$", re.IGNORECASE)


def from_images(text: str) -> list[str]:
    """The images a Dockerfile's `FROM` lines name: not `scratch`, an earlier stage, or an `ARG` value."""
    images, stages = [], set()
    for line in text.splitlines():
        match = FROM_LINE.match(line)
        if not match:
            continue
        image, rest = match.group(3), match.group(4).split()
        if image.lower() != "scratch" and image.lower() not in stages and "$" not in image and image not in images:
            images.append(image)
        if len(rest) >= 2 and rest[0].lower() == "as":
            stages.add(rest[1].lower())
    return images


def substitute_from(text: str, substitutes: dict[str, str]) -> str:
    """The Dockerfile with each `FROM IMAGE` that `substitutes` maps built on its local image instead."""
    out = []
    for line in text.splitlines(keepends=True):
        match = FROM_LINE.match(line)
        if match and match.group(3) in substitutes:
            line = f"{match.group(1)}{match.group(2)}{substitutes[match.group(3)]}{match.group(4)}" + (
                "\n" if line.endswith("\n") else "")
        out.append(line)
    return "".join(out)


def pull_problem(client: Any, image: str) -> str | None:
    """None when `image` is here or could be pulled; else why not, in one line."""
    try:
        if have_image(client, image):
            return None
        client.images.pull(image)
        return None
    except docker.errors.APIError as e:
        return _one_line(RuntimeError(e.explanation or e), 200)  # the engine's own words, not the HTTP wrapping
    except (docker.errors.DockerException, SandboxUnavailable) as e:
        return _one_line(e, 200)

