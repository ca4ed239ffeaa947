"""Train = deploy on the real AppWorld suite (fake `appworld` package, tests/test_appworld_real.py): a rescue
rollout's prompt is the official 24-message opening that `unscaffold run appworld` shows the student, token
for token, under the base harness and under a sibling."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.helpers import final, needs_bwrap
from tests.test_appworld_real import OPENING, appworld_root  # noqa: F401  (pytest fixture)
from unscaffold.cli import app
from unscaffold.llm.types import Message
from unscaffold.run.models import RunConfig
from unscaffold.run.runner import run

TASK = "aaa1111_1"


@needs_bwrap
def test_rescue_prompts_are_the_opening_run_renders(tmp_path: Path, appworld_root: Path,  # noqa: F811
                                                    write_replay, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UNSCAFFOLD_CACHE", str(tmp_path / "cache"))
    from trl import GRPOTrainer

    rendered: list[tuple[str, list[int]]] = []  # (environment, prompt ids) as TRL rendered them
    real_tokenize = GRPOTrainer._tokenize_prompts

    def tokenize_spy(self: GRPOTrainer, prompts: list) -> tuple:
        out = real_tokenize(self, prompts)
        rendered.extend(zip(self._batch_environments, [list(ids) for ids in out[0]], strict=True))
        return out

    monkeypatch.setattr(GRPOTrainer, "_tokenize_prompts", tokenize_spy)
    out = tmp_path / "rescue"
    result = CliRunner().invoke(app, [
        "rescue", "train", "appworld", "--data", str(appworld_root), "--split", "dev", "--tasks", TASK,
        "--model", "tiny", "--router", "random", "--max-steps", "1", "--k", "2", "--tasks-per-step", "1",
        "--steps-per-generation", "1", "--max-completion-length", "8", "--out", str(out)])
    assert result.exit_code == 0, result.output
    [line] = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert line["rescued_groups"] == 1  # the tiny model fails: the group was re-sampled under two siblings
    sibling = line["rescue_harnesses"][0]
    assert {env for env, _ in rendered} == {"base", *line["rescue_harnesses"]}

    from unscaffold.llm.hf_backend import HFModel

    deployed = HFModel("hf:tiny", str(tmp_path / "cache" / "tiny" / "qwen3_5_think-seed0"))
    for harness, env in (("minimal", "base"), (str(out / "pool" / sibling), sibling)):
        runs = tmp_path / f"run-{env}"
        run(RunConfig(suite="appworld", data=appworld_root, split="dev", task_ids=[TASK], harness=harness,
                      student=write_replay({"*": [final("done")]}), out=runs))
        traj = json.loads((runs / "trials" / TASK / "trajectory.json").read_text())
        assert traj["opening_messages"] == OPENING
        expected = deployed.prompt_ids([Message(**m) for m in traj["messages"][:OPENING]], traj["tools"])
        ids = [ids for e, ids in rendered if e == env]
        assert ids and all(i == expected for i in ids), env


def test_openings_built_for_training_leave_no_bridge_and_the_suite_open(tmp_path: Path,
                                                                          appworld_root: Path) -> None:  # noqa: F811
    """Each opening's trial is never scored: its bridge is released at once, and the suite stays usable (it
    is closed by its owner when training ends, not by the openings)."""
    import subprocess

    from tests.test_appworld_real import BRIDGE
    from unscaffold.benchmarks import load_suite
    from unscaffold.rescue.prompts import task_openings

    with load_suite("appworld", appworld_root) as suite:
        tasks = suite.named_tasks([TASK], "dev")
        first = task_openings(suite, tasks, "demonstration", "none", tmp_path / "openings")
        assert suite._bridges == {}  # type: ignore[attr-defined]
        assert subprocess.run(["pgrep", "-f", f"{BRIDGE} serve"], capture_output=True, text=True).stdout == ""
        again = task_openings(suite, tasks, "demonstration", "none", tmp_path / "openings")
    assert list(first) == [TASK] and len(first[TASK]) == OPENING - 1 and first == again
    assert list((tmp_path / "openings").iterdir()) == []
