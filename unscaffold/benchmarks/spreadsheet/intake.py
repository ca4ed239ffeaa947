"""Take the student's output workbook out of the workspace as a hostile artifact (see
`unscaffold.untrusted`): walked with no link followed, a regular file within the size limit, copied to
a private folder; scoring only ever reads that copy."""

from __future__ import annotations

from pathlib import Path

from unscaffold.untrusted import UntrustedFileError, copy_untrusted

Refused = UntrustedFileError  # `.link`: a refused link is recorded, and the trial never becomes training data


def take_out(workspace: Path, relative: str, dest: Path, max_bytes: int) -> Path | Refused:
    """`dest` holding the copy, or the refusal saying why there is none."""
    try:
        return copy_untrusted(workspace, relative, dest, max_bytes)
    except UntrustedFileError as e:
        if not e.refused:
            return UntrustedFileError(f"output file {relative} not found", refused=False)
        return e
