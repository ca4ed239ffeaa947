"""The LD_PRELOAD recorder (`preload.c`), built once per host with the C compiler at hand and cached by
its source's hash; without a compiler, commands are recorded by the Python recorder alone."""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "preload.c"
LIBRARY = "libexec.so"  # its name beside `sitecustomize.py` in the sandbox's recorder folder
CONF = "preload.conf"  # beside it: the output folder, the workspace, the event cap, the value cap
_BUILD_S = 120


def cache_root() -> Path:
    """$UNSCAFFOLD_CACHE or ~/.cache/unscaffold, as the built-in models use."""
    return Path(os.environ.get("UNSCAFFOLD_CACHE") or Path.home() / ".cache" / "unscaffold")


@functools.cache
def library() -> Path | None:
    """The built library, or None when this host has no C compiler (or the build failed)."""
    compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if compiler is None or not SOURCE.is_file():
        return None
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    target = cache_root() / "recorder" / f"{digest}-{LIBRARY}"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        built = Path(scratch) / LIBRARY
        try:
            done = subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(built), str(SOURCE), "-ldl"],
                                  capture_output=True, timeout=_BUILD_S)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if done.returncode != 0 or not built.is_file():
            return None
        os.replace(built, target)  # atomic: a concurrent build of the same source writes the same bytes
    return target


def conf_text(out: str, workspace: str, max_events: int, max_chars: int) -> str:
    return f"{out}\n{workspace}\n{max_events}\n{max_chars}\n"
