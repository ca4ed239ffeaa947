"""Images without a registry, without an engine: the machine's Debian mirror read from its apt sources,
tags by content, `FROM` lines read and substituted, the fallback and the advice when a `FROM` cannot be
pulled, and `--base-image` on the command line (a fake engine records what would be built)."""

from __future__ import annotations

import importlib.metadata
import os
import re
from pathlib import Path
from typing import Any

import docker.errors
import pytest
from typer.testing import CliRunner

from tests.test_docker_sandbox import FakeClient, FakeImages, FakeNetworks
from unscaffold.cli import app
from unscaffold.errors import EnvironmentBroken, SandboxUnavailable
from unscaffold.minimal_harness.sandbox import docker_sandbox as ds
from unscaffold.minimal_harness.sandbox.base import SUITES_IMAGE_DIR, SandboxConfig, SandboxSettings
from unscaffold.minimal_harness.sandbox.docker_sandbox import context_hash, resolve_image
from unscaffold.offline import images

DEBIAN_SOURCES = """Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
"""


def apt_root(tmp_path: Path, sources: str | None = None, one_line: str | None = None) -> Path:
    root = tmp_path / "apt"
    (root / "sources.list.d").mkdir(parents=True)
    if sources is not None:
        (root / "sources.list.d" / "debian.sources").write_text(sources)
    if one_line is not None:
        (root / "sources.list").write_text(one_line)
    (tmp_path / "os-release").write_text('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nVERSION_CODENAME=bookworm\n')
    return root


def test_the_mirror_is_the_main_archive_of_this_release(tmp_path: Path) -> None:
    recipe = images.base_recipe(root=apt_root(tmp_path, DEBIAN_SOURCES), os_release=tmp_path / "os-release")
    assert recipe == images.BaseRecipe(suite="bookworm", mirror="http://deb.debian.org/debian")
    one_line = "deb [signed-by=/usr/share/keyrings/k.gpg] http://mirror.example/debian/ bookworm main contrib\n"
    other = images.base_recipe(root=apt_root(tmp_path / "b", one_line=one_line), os_release=tmp_path / "os-release")
    assert other.mirror == "http://mirror.example/debian"
    assert other.tag != recipe.tag and other.tag.startswith("unscaffold-base:") and len(other.tag) == 32
    assert images.base_recipe(root=apt_root(tmp_path / "c", DEBIAN_SOURCES),
                              os_release=tmp_path / "os-release").tag == recipe.tag  # same recipe, same tag


def test_no_mirror_for_this_release_says_how_to_name_one(tmp_path: Path) -> None:
    root = apt_root(tmp_path, DEBIAN_SOURCES.replace("bookworm bookworm-updates", "trixie"))
    with pytest.raises(SandboxUnavailable) as err:
        images.base_recipe(root=root, os_release=tmp_path / "os-release")
    assert str(err.value) == (f"{root}: no Debian mirror for bookworm among the apt sources; pass --mirror URL "
                              "(and --suite NAME)")


def test_from_lines_read_and_substituted() -> None:
    text = ("ARG V=3\nFROM --platform=linux/amd64 golang:1.22 AS build\nRUN go build\n"
            "from ubuntu:24.04\nCOPY --from=build /out /out\nFROM build AS again\nFROM scratch\nFROM python:${V}\n")
    assert images.from_images(text) == ["golang:1.22", "ubuntu:24.04"]
    assert images.substitute_from(text, {"ubuntu:24.04": "unscaffold-base:0123", "golang:1.22": "go:local"}) == (
        "ARG V=3\nFROM --platform=linux/amd64 go:local AS build\nRUN go build\n"
        "from unscaffold-base:0123\nCOPY --from=build /out /out\nFROM build AS again\nFROM scratch\nFROM python:${V}\n")


def test_the_suites_libraries_are_pinned_to_this_environment() -> None:
    assert images.suite_requirements() == [f"{name}=={importlib.metadata.version(name)}"
                                           for name in ("rdkit", "numpy", "openpyxl")]


def test_the_suites_image_installs_what_each_suite_folder_asks_for() -> None:
    """Each suite lists its own libraries in its folder; the shipped Dockerfile installs their union."""
    assert images.suite_libraries() == {"rdkit": ">=2024.3", "numpy": ">=1.26", "openpyxl": ">=3.1"}
    pip = next(line for line in (SUITES_IMAGE_DIR / "Dockerfile").read_text().splitlines()
               if line.startswith("RUN pip install"))
    assert sorted(re.findall(r'"([^"]+)"', pip)) == sorted(f"{name}{spec}"
                                                          for name, spec in images.suite_libraries().items())


def test_a_suite_requirement_that_is_not_one_names_its_file_and_line(tmp_path: Path) -> None:
    files = [tmp_path / suite / "image" / "requirements.txt" for suite in ("a", "b")]
    for path, text in zip(files, ("openpyxl>=3.1\n", "# comment\nrdkit >=2024.3\n\nnot a requirement\n"), strict=True):
        path.parent.mkdir(parents=True)
        path.write_text(text)
    with pytest.raises(EnvironmentBroken) as err:
        images.suite_libraries(files)
    assert str(err.value) == (f"{tmp_path / 'b' / 'image' / 'requirements.txt'}: line 4: not a requirement "
                              "(NAME>=VERSION): 'not a requirement'")
    (tmp_path / "b" / "image" / "requirements.txt").write_text("openpyxl>=3.0\n")
    with pytest.raises(EnvironmentBroken) as err:
        images.suite_libraries(files)
    assert str(err.value) == (f"{tmp_path / 'b' / 'image' / 'requirements.txt'}: line 1: openpyxl is also "
                              "required as openpyxl>=3.1")


def test_the_host_pip_index_reaches_the_build_only_over_http(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bundle = tmp_path / "ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    monkeypatch.setenv("PIP_INDEX_URL", "https://pypi.example/simple")
    monkeypatch.setenv("PIP_CERT", str(bundle))
    assert images.host_pip() == ("https://pypi.example/simple", bundle)
    monkeypatch.setenv("PIP_INDEX_URL", "file:///opt/pypi/simple")  # a folder on the host: not inside a build
    monkeypatch.setenv("PIP_CERT", str(tmp_path / "missing.pem"))
    assert images.host_pip() == (None, None)


class RecordingImages(FakeImages):
    """Keeps each build's Dockerfile text and context listing (both are temporary folders)."""

    def __init__(self, unpullable: set[str] | None = None, have: set[str] | None = None) -> None:
        super().__init__(have=have)
        self.unpullable = unpullable or set()
        self.texts: list[str] = []
        self.contexts: list[list[str]] = []

    def build(self, **kwargs: Any) -> Any:
        dockerfile = Path(kwargs.get("dockerfile") or Path(kwargs["path"]) / "Dockerfile")
        self.texts.append(dockerfile.read_text())
        self.contexts.append(sorted(p.name for p in Path(kwargs["path"]).iterdir()))
        return super().build(**kwargs)

    def pull(self, image: str) -> None:
        if image in self.unpullable:
            raise docker.errors.APIError("500 Server Error", explanation='Get "https://registry-1.docker.io/v2/": '
                                         "dial tcp: lookup registry-1.docker.io: no such host")
        super().pull(image)


def task_env(tmp_path: Path) -> Path:
    env = tmp_path / "environment"
    env.mkdir()
    (env / "Dockerfile").write_text("FROM ubuntu:24.04\nRUN apt-get install -y jq\nWORKDIR /app\nCOPY a.txt .\n")
    (env / "a.txt").write_text("a\n")
    return env


def test_a_mapped_from_is_built_on_the_local_image_and_tagged_apart(tmp_path: Path) -> None:
    env = task_env(tmp_path)
    fake = RecordingImages(unpullable={"ubuntu:24.04"}, have={"unscaffold-base:0123"})
    client = FakeClient(images=fake)
    config = SandboxConfig(kind="docker", workspace=tmp_path / "ws", build=env,
                           base_images={"ubuntu:24.04": "unscaffold-base:0123", "alpine:3": "unused"})
    tag, note = resolve_image(client, config)
    assert tag == f"unscaffold-env:{context_hash(env.resolve(), {'ubuntu:24.04': 'unscaffold-base:0123'})}"
    assert tag != f"unscaffold-env:{context_hash(env.resolve())}"  # never mistaken for the real base's build
    assert note == "substitute base unscaffold-base:0123 for ubuntu:24.04"
    assert fake.texts == ["FROM unscaffold-base:0123\nRUN apt-get install -y jq\nWORKDIR /app\nCOPY a.txt .\n"]
    assert fake.builds[0]["path"] == str(env.resolve()) and fake.contexts == [["Dockerfile", "a.txt"]]
    assert fake.builds[0]["labels"] == {"unscaffold": "1"} and "network_mode" not in fake.builds[0]
    assert resolve_image(client, config) == (tag, note) and len(fake.builds) == 1  # built once


def test_a_task_image_may_be_mapped_too(tmp_path: Path) -> None:
    config = SandboxConfig(kind="docker", workspace=tmp_path, image="ubuntu:24.04",
                           base_images={"ubuntu:24.04": "unscaffold-base:0123"})
    assert resolve_image(FakeClient(), config) == ("unscaffold-base:0123",
                                                   "substitute base unscaffold-base:0123 for ubuntu:24.04")


def test_an_unpullable_task_from_names_the_option_that_maps_it(tmp_path: Path) -> None:
    env = task_env(tmp_path)
    fake = RecordingImages(unpullable={"ubuntu:24.04"})
    with pytest.raises(SandboxUnavailable) as err:
        resolve_image(FakeClient(images=fake), SandboxConfig(kind="docker", workspace=tmp_path / "ws", build=env))
    assert str(err.value) == (
        f"{env.resolve() / 'Dockerfile'}: FROM ubuntu:24.04 cannot be pulled (Get \"https://registry-1.docker.io/v2/"
        "\": dial tcp: lookup registry-1.docker.io: no such host); map it to a local image with --base-image "
        "ubuntu:24.04=LOCAL_IMAGE (`unscaffold image base` makes one)")
    assert fake.builds == []


def test_the_suites_image_falls_back_to_the_local_one_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(ds, "_SAID", set())
    monkeypatch.setattr(ds, "_STAND_INS", {})
    fake = RecordingImages(unpullable={"python:3.11-slim"})
    made: list[Any] = []

    def local_suites_image(client: Any, say: Any) -> str:
        made.append(client)
        fake.have.add("unscaffold-suites:ab")
        return "unscaffold-suites:ab"

    monkeypatch.setattr(images, "local_suites_image", local_suites_image)
    client = FakeClient(images=fake)
    tag, note = resolve_image(client, SandboxConfig(kind="docker", workspace=tmp_path / "ws"))
    assert (tag, note) == ("unscaffold-suites:ab", "built locally: python:3.11-slim cannot be pulled")
    assert made == [client] and fake.builds == []
    assert caplog.messages == [
        'python:3.11-slim cannot be pulled (Get "https://registry-1.docker.io/v2/": dial tcp: lookup '
        "registry-1.docker.io: no such host): the built-in suites run on the suites' image built from this "
        "machine's Debian mirror (`unscaffold image suites`)"]
    assert resolve_image(client, SandboxConfig(kind="docker", workspace=tmp_path / "ws2")) == (tag, note)
    assert made == [client] and len(caplog.messages) == 1  # chosen and said once per process
    assert "python:3.11-slim" in (SUITES_IMAGE_DIR / "Dockerfile").read_text()


def test_a_task_image_that_cannot_be_pulled_names_the_option(tmp_path: Path) -> None:
    class Containers:
        def create(self, **kwargs: Any) -> Any:
            raise docker.errors.ImageNotFound("no such image: ubuntu:24.04")

        def list(self, **kwargs: Any) -> list[Any]:  # no leftover container of a dead owner
            return []

    client = FakeClient(images=RecordingImages(unpullable={"ubuntu:24.04"}))
    client.containers = Containers()  # type: ignore[assignment]
    with pytest.raises(SandboxUnavailable) as err:
        ds.DockerSandbox(SandboxConfig(kind="docker", workspace=tmp_path / "ws", image="ubuntu:24.04"), client=client)
    assert str(err.value) == ('the image ubuntu:24.04 cannot be pulled (Get "https://registry-1.docker.io/v2/": dial '
                              "tcp: lookup registry-1.docker.io: no such host); map it to a local image with "
                              "--base-image ubuntu:24.04=LOCAL_IMAGE")


def test_builds_use_the_host_network_when_the_engine_has_no_bridge(tmp_path: Path) -> None:
    fake = RecordingImages()
    client = FakeClient(images=fake)
    client.networks = FakeNetworks(bridge=False)
    resolve_image(client, SandboxConfig(kind="docker", workspace=tmp_path / "ws", build=task_env(tmp_path)))
    assert fake.builds[0]["network_mode"] == "host"


def test_the_suites_build_on_the_base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bundle = tmp_path / "ca.pem"
    bundle.write_text("CA")
    monkeypatch.setattr(images, "host_pip", lambda: ("https://pypi.example/simple", bundle))
    fake = RecordingImages()
    tag = images.build_suites(FakeClient(images=fake), "unscaffold-base:0123", say=lambda message: None)
    assert tag == images.suites_build("unscaffold-base:0123").tag and tag.startswith("unscaffold-suites:")
    assert fake.builds[0]["buildargs"] == {"BASE": "unscaffold-base:0123", "PIP_INDEX_URL": "https://pypi.example/simple",
                                           "REQUIREMENTS": " ".join(images.suite_requirements())}
    assert fake.contexts == [["Dockerfile", "build-ca.pem"]]
    assert fake.texts == [(images.LOCAL_SUITES_DIR / "Dockerfile").read_text()]
    assert images.suites_build("unscaffold-base:4567").tag != tag  # another base, another tag


def test_the_base_needs_root_and_debootstrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(images.shutil, "which", lambda name: None)
    recipe = images.BaseRecipe(suite="bookworm", mirror="http://deb.debian.org/debian")
    with pytest.raises(SandboxUnavailable) as err:
        images.build_base(FakeClient(), recipe)
    assert str(err.value) == (f"the base image {recipe.tag} is not built and building it needs root and debootstrap "
                              "(`apt-get install -y debootstrap`, then `sudo unscaffold image base`)")


def test_base_image_option_pairs() -> None:
    settings = SandboxSettings.model_validate({"base_images": "ubuntu:24.04=unscaffold-base:0123, golang:1.22=go:1"})
    assert settings.substitutes() == {"ubuntu:24.04": "unscaffold-base:0123", "golang:1.22": "go:1"}
    result = CliRunner().invoke(app, ["run", "harbor", "--student", "oracle", "--out", "/nonexistent/run",
                                      "--sandbox", "docker", "--base-image", "ubuntu:24.04"])
    assert result.exit_code == 2
    assert result.output == "error: --base-image: 'ubuntu:24.04' is not IMAGE=LOCAL_IMAGE\n"


class ImportingAPI:
    """The engine's import endpoint: reads the whole tar stream and, unless told to fail, adds the tag."""

    def __init__(self, images: FakeImages, fail: bool = False) -> None:
        self.images, self.fail = images, fail
        self.imports: list[dict[str, Any]] = []

    def import_image(self, src: Any, repository: str, tag: str, changes: list[str], stream_src: bool) -> str:
        import tarfile

        with tarfile.open(fileobj=src, mode="r|") as tar:
            names = sorted(m.name for m in tar)
        self.imports.append({"repository": repository, "tag": tag, "changes": changes, "names": names})
        if self.fail:
            return '{"errorDetail":{"message":"no space left on device"}}'
        self.images.have.add(f"{repository}:{tag}")
        return '{"status":"sha256:0123"}'


def fake_debootstrap(tmp_path: Path) -> Path:
    """Writes a tiny system, with the apt caches the import leaves out, and records its arguments."""
    script = tmp_path / "debootstrap"
    script.write_text(f'#!/bin/bash\necho "$*" > {tmp_path}/argv\nmkdir -p "$3/etc" "$3/var/cache/apt/archives" '
                      '"$3/var/lib/apt/lists/partial"\necho bookworm > "$3/etc/debian_version"\n'
                      'touch "$3/var/cache/apt/archives/bash.deb" "$3/var/lib/apt/lists/Packages"\n')
    script.chmod(0o755)
    return script


def importing_client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail: bool = False) -> FakeClient:
    """An engine whose imports are recorded (or refused), with debootstrap faked on PATH; as root only."""
    if os.geteuid() != 0:
        pytest.skip("debootstrap runs only as root")
    script = fake_debootstrap(tmp_path)
    monkeypatch.setattr(images.shutil, "which", lambda name: str(script) if name == "debootstrap" else None)
    fake = FakeImages()
    client = FakeClient(images=fake)
    client.api = ImportingAPI(fake, fail=fail)  # type: ignore[assignment]
    return client


BOOKWORM = images.BaseRecipe(suite="bookworm", mirror="http://deb.debian.org/debian")


def test_the_base_is_debootstrapped_and_imported_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    client = importing_client(tmp_path, monkeypatch)
    recipe = BOOKWORM
    said: list[str] = []
    assert images.build_base(client, recipe, say=said.append) == recipe.tag
    assert images.build_base(client, recipe, say=said.append) == recipe.tag  # found by its tag the second time
    rootfs = (tmp_path / "argv").read_text().split()[2]
    assert (tmp_path / "argv").read_text() == f"--variant=minbase bookworm {rootfs} http://deb.debian.org/debian\n"
    assert not Path(rootfs).exists()  # the temporary system is removed
    [imported] = client.api.imports
    assert (imported["repository"], imported["tag"]) == tuple(recipe.tag.split(":"))
    assert imported["changes"] == ["LABEL unscaffold=1 unscaffold.recipe=bookworm@http://deb.debian.org/debian",
                                   'CMD ["bash"]']
    assert imported["names"] == [".", "./etc", "./etc/debian_version", "./var", "./var/cache", "./var/cache/apt",
                                 "./var/cache/apt/archives", "./var/lib", "./var/lib/apt", "./var/lib/apt/lists",
                                 "./var/lib/apt/lists/partial"]  # no fetched packages or lists
    assert said[0] == "debootstrap --variant=minbase bookworm from http://deb.debian.org/debian ..."
    assert said[1] == f"importing {recipe.tag} ..." and said[2].startswith(f"built {recipe.tag} in ")


def test_a_failed_import_is_said_with_the_engines_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    client = importing_client(tmp_path, monkeypatch, fail=True)
    recipe = BOOKWORM
    with pytest.raises(SandboxUnavailable) as err:
        images.build_base(client, recipe, say=lambda message: None)
    assert str(err.value) == (f"docker could not import {recipe.tag}: "
                              '{"errorDetail":{"message":"no space left on device"}}')
