"""Against a real Docker engine: a daemon a command leaves (`setsid`) is dead before the verifier runs, so
replacing /tests/test.sh from the background earns nothing; the workspace's disk is bounded as it is
written where the engine shares this host's mounts. Skipped, saying why, where no engine answers."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import call, final
from tests.test_hostile_runs import HONEST_VERIFIER, harbor_task
from unscaffold.collect.models import RunConfig
from unscaffold.collect.runner import run
from unscaffold.minimal_harness.sandbox.disk import engine_shares_mounts

pytestmark = pytest.mark.docker

# Rewrites the tests as soon as they are copied in, from a session of its own (the command's process group
# is ended with the command; this one is not in it), then returns at once.
DAEMON = ("setsid bash -c 'while :; do echo \"echo {\\\"reward\\\": 1} > /logs/verifier/reward.json\" "
          "> /tests/test.sh 2>/dev/null; sleep 0.01; done' > /dev/null 2>&1 < /dev/null & echo started")


def test_a_setsid_daemon_replacing_test_sh_earns_nothing(docker_suites_image: str, tmp_path: Path,
                                                         write_replay: Any) -> None:
    harbor_task(tmp_path / "tasks", "t", HONEST_VERIFIER)
    alive = "sleep 1; cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -c '[w]hile :' || true"
    spec = write_replay({"t": [call(DAEMON), call(alive), final("done")]})
    summary = run(RunConfig(suite="harbor", data=tmp_path / "tasks", student=spec, out=tmp_path / "run",
                            sandbox={"kind": "docker"}))
    trial = tmp_path / "run" / "trials" / "t"
    result = json.loads((trial / "result.json").read_text())
    messages = json.loads((trial / "trajectory.json").read_text())["messages"]
    assert messages[3]["content"].startswith("started\n")
    assert messages[5]["content"].startswith("0\n")  # the daemon was ended with the command that started it
    assert summary.per_task == {"t": 0.0}
    assert result["outcome"] == "failed" and result["details"]["source"] == "reward.json"


def test_the_workspace_disk_is_bounded_as_it_is_written(docker_suites_image: str, tmp_path: Path,
                                                        write_replay: Any) -> None:
    if os.geteuid() != 0 or not engine_shares_mounts():
        pytest.skip("a filesystem of the trial's own needs root and an engine sharing this host's mounts")
    harbor_task(tmp_path / "tasks", "t", HONEST_VERIFIER)
    spec = write_replay({"t": [call("fallocate -l 6G big 2>&1; echo ok > out.txt; cat out.txt"), final("done")]})
    summary = run(RunConfig(suite="harbor", data=tmp_path / "tasks", student=spec, out=tmp_path / "run",
                            sandbox={"kind": "docker"}))
    trial = tmp_path / "run" / "trials" / "t"
    observation = json.loads((trial / "trajectory.json").read_text())["messages"][3]["content"]
    assert observation.startswith("fallocate: fallocate failed: No space left on device\nok\n")
    assert summary.per_task == {"t": 1.0}  # the honest work beside it still counts
    result = json.loads((trial / "result.json").read_text())
    assert result["isolation"].endswith("the workspace on the trial's own filesystem; the workspace and writable "
                                        "folders on an ext4 image of 4 GiB of their own, dropped after")
