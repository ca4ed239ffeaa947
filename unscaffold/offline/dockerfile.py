"""A task's `environment/Dockerfile`, read for the local sandbox: what it can apply, what it cannot.

The local sandbox shows the host system, not an image, so it applies `WORKDIR`, `ENV` and `COPY`/`ADD`
of files from the task folder into the workspace, and records every other line that changes the
environment (`RUN`, a `FROM` image that is not a plain base system, a copy it cannot make) with the
advice to build the image with `--sandbox docker`."""

from __future__ import annotations

import glob
import json
import os
import posixpath
import re
import shlex
from pathlib import Path

from pydantic import BaseModel, Field

from unscaffold.nofollow import copy_in, read_text

# Base images the host stands in for: a plain system with Python (the host is a Debian-like system).
HOST_LIKE_IMAGES = ("ubuntu", "debian", "python", "buildpack-deps")
# Instructions that change nothing a command inside the sandbox would see.
NO_EFFECT = {"ARG", "CMD", "ENTRYPOINT", "EXPOSE", "LABEL", "MAINTAINER", "HEALTHCHECK", "STOPSIGNAL", "SHELL",
             "USER", "VOLUME", "ONBUILD"}
MAX_TEXT_BYTES = 4 << 20  # a task's Dockerfile, task.toml or instruction.md (read into memory, as root)
ARCHIVE = re.compile(r"\.(tar|tar\.gz|tgz|tar\.bz2|tbz2|tar\.xz|txz)$")


class Copy(BaseModel):
    source: Path = Field(description="a file or folder in the build context")
    target: str = Field(description="relative to the workspace")


class LocalPlan(BaseModel):
    """What the local sandbox makes of a Dockerfile."""

    workdir: str
    context: Path | None = Field(None, description="the build context (the task's environment folder)")
    env: dict[str, str] = Field(default_factory=dict)
    copies: list[Copy] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list, description="`line N: TEXT (why)` for each line not applied")
    not_applied: list[str] = Field(default_factory=list, description="every line not applied, in order: the "
                                   "skipped ones, a `FROM` of an image like the host's, which the local sandbox "
                                   "does not pull either (it runs this machine's own system), `USER`, and lines "
                                   "with no effect on commands (`CMD`, `EXPOSE`, ...)")


HEREDOC = re.compile(r"<<-?\s*[\"']?(\w+)[\"']?")


def instructions(text: str) -> list[tuple[int, str, str]]:
    """(line number, INSTRUCTION, arguments): continuation lines joined, comments dropped, a heredoc's
    body (`RUN <<EOF ... EOF`) kept with its instruction."""
    out: list[tuple[int, str, str]] = []
    pending, start, heredoc = "", 0, None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if heredoc is not None:
            if stripped == heredoc:
                heredoc = None
            continue
        if not stripped or stripped.startswith("#"):
            continue
        start = start or number
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        full = (pending + stripped).strip()
        pending = ""
        keyword, _, args = full.partition(" ")
        out.append((start, keyword.upper(), args.strip()))
        start = 0
        marker = HEREDOC.search(args)
        heredoc = marker.group(1) if marker else None
    if pending.strip():
        keyword, _, args = pending.strip().partition(" ")
        out.append((start, keyword.upper(), args.strip()))
    return out


def read_task_text(path: Path) -> str:
    """A text file of a task folder, opened with no link followed (`RefusedPath` otherwise)."""
    return read_text(path.parent, path.name, MAX_TEXT_BYTES)


def host_like(image: str) -> bool:
    name = image.split("@")[0]
    if ":" in name.rsplit("/", 1)[-1]:
        name = name.rsplit(":", 1)[0]
    return name.removeprefix("docker.io/").removeprefix("library/") in HOST_LIKE_IMAGES


def _parse_env(args: str) -> dict[str, str]:
    if "=" not in args.split(" ", 1)[0]:  # legacy `ENV KEY value with spaces`
        key, _, value = args.partition(" ")
        return {key: value.strip()}
    return dict(part.split("=", 1) for part in shlex.split(args) if "=" in part)


def _copy_args(args: str) -> tuple[list[str], list[str]]:
    """(flags, paths) of a COPY or ADD, in either the shell or the JSON form."""
    words = shlex.split(args)
    flags = [w for w in words if w.startswith("--")]
    rest = args
    for flag in flags:
        rest = rest.replace(flag, "", 1)
    rest = rest.strip()
    if rest.startswith("["):
        try:
            paths = [str(p) for p in json.loads(rest)]
        except json.JSONDecodeError:
            paths = shlex.split(rest)
    else:
        paths = shlex.split(rest)
    return flags, paths


def _in_workdir(target: str, workdir: str) -> str | None:
    """An absolute target relative to the workdir (`.` for the workdir itself), or None when outside."""
    rel = posixpath.relpath(posixpath.normpath(target), workdir)
    return None if rel == ".." or rel.startswith("../") else rel


def final_workdir(steps: list[tuple[int, str, str]]) -> str | None:
    current = "/"
    for _, keyword, args in steps:
        if keyword == "WORKDIR":
            current = posixpath.normpath(posixpath.join(current, args))
    return None if current == "/" else current


def local_plan(dockerfile: Path, workdir: str) -> LocalPlan:
    """Read the Dockerfile as the local sandbox would apply it. `workdir` is where the workspace appears
    (the task's choice, else the Dockerfile's last WORKDIR): only copies below it can be made."""
    context = dockerfile.parent.absolute()  # not resolved: every copy is walked from here with no link followed
    plan = LocalPlan(workdir=workdir, context=context)
    current = "/"
    for number, keyword, args in instructions(read_task_text(dockerfile)):
        text = f"{keyword} {args}"[:120]

        def skip(why: str, number: int = number, text: str = text) -> None:
            plan.skipped.append(f"line {number}: {text} ({why})")
            plan.not_applied.append(plan.skipped[-1])

        if keyword == "FROM":
            image = next((w for w in args.split() if not w.startswith("--")), "")
            if not host_like(image):
                skip("the local sandbox has no such image")
            else:
                plan.not_applied.append(f"line {number}: {text} (not pulled: commands see this machine's own "
                                        "system and programs)")
        elif keyword == "WORKDIR":
            current = posixpath.normpath(posixpath.join(current, args))
        elif keyword == "ENV":
            plan.env.update(_parse_env(args))
        elif keyword in ("COPY", "ADD"):
            flags, paths = _copy_args(args)
            if any(f.startswith("--from") for f in flags):
                skip("copies from another build stage")
                continue
            if len(paths) < 2:
                skip("no source and target")
                continue
            *sources, target = paths
            rel = _in_workdir(target if target.startswith("/") else posixpath.join(current, target), workdir)
            if rel is None:
                skip(f"its target is outside the workspace {workdir}")
                continue
            found = _sources(context, sources, keyword)
            if isinstance(found, str):
                skip(found)
                continue
            into_folder = target.endswith("/") or len(found) > 1 or any(s.is_dir() for s in found) or rel == "."
            for source in found:
                name = source.name if into_folder and not source.is_dir() else ""
                plan.copies.append(Copy(source=source, target=posixpath.normpath(posixpath.join(rel, name))))
        elif keyword == "USER":
            plan.not_applied.append(f"line {number}: {text} (commands run as the sandbox's own user)")
        elif keyword in NO_EFFECT:
            plan.not_applied.append(f"line {number}: {text} (no effect on the commands the sandbox runs)")
        else:
            skip("the local sandbox cannot run build steps")
    return plan


def _sources(context: Path, sources: list[str], keyword: str) -> list[Path] | str:
    """The build-context paths a COPY names, or why they cannot be copied."""
    found: list[Path] = []
    for source in sources:
        if re.match(r"^[a-z]+://", source) or source.startswith("git@"):
            return "fetches from the network"
        if keyword == "ADD" and ARCHIVE.search(source):
            return "ADD unpacks an archive"
        matches = sorted(glob.glob(str(context / source.lstrip("/"))))
        if not matches:
            return f"{source} is not in the task's environment folder"
        for match in matches:
            relative = os.path.relpath(os.path.normpath(match), context)
            if relative == ".." or relative.startswith("../"):
                return f"{source} lies outside the task's environment folder"
            found.append(context / relative)
    return found


def apply_copies(plan: LocalPlan, workspace: Path) -> None:
    """Copy what the Dockerfile copies into the workdir: a folder's contents, or a file. The task folder
    is untrusted: no link is followed in the source or in the target's path (one met raises
    `RefusedPath`), so nothing is read or written outside the task's folder and the workspace."""
    if plan.context is None:
        return
    for copy in plan.copies:
        copy_in(plan.context, copy.source.relative_to(plan.context).as_posix(), workspace, copy.target)
