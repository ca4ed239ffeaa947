"""A test run leaves nothing new directly under /tmp: the code under test, its child processes and
multiprocessing all put their temporary files under the session's pytest folder (see conftest.py)."""

from __future__ import annotations

import multiprocessing.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest


def test_temporary_files_go_under_the_sessions_pytest_folder(tmp_path_factory: pytest.TempPathFactory) -> None:
    here = Path(tempfile.gettempdir())
    assert here == tmp_path_factory.getbasetemp() / "tmp"
    assert os.environ["TMPDIR"] == str(here)
    assert Path(multiprocessing.util.get_temp_dir()).parent == here  # the pymp-* folder
    child = subprocess.run([sys.executable, "-c", "import tempfile; print(tempfile.gettempdir())"],
                           capture_output=True, text=True, check=True)
    assert child.stdout.strip() == str(here)
