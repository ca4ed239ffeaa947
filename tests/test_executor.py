"""`--executor`: its spec, the message without Ray, and the files shipped to workers (no cluster needed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.helpers import HARBOR_EXAMPLES, HARBOR_REPLAY, message_of
from unscaffold.cli import app
from unscaffold.errors import InputError
from unscaffold.run import shipping
from unscaffold.run.models import RunConfig
from unscaffold.specs import ExecutorSpec


@pytest.mark.parametrize(("spec", "expected"), [
    ("local", ExecutorSpec(kind="local")),
    ("ray", ExecutorSpec(kind="ray")),
    ("ray:auto", ExecutorSpec(kind="ray", address="auto")),
    ("ray:ray://head:10001?cpus=0.5&memory=2G", ExecutorSpec(kind="ray", address="ray://head:10001", cpus=0.5,
                                                            memory_bytes=2 * 2**30)),
    ("ray?memory=512MiB", ExecutorSpec(kind="ray", memory_bytes=512 * 2**20)),
])
def test_executor_specs(spec: str, expected: ExecutorSpec) -> None:
    assert ExecutorSpec.parse(spec) == expected


@pytest.mark.parametrize(("spec", "message"), [
    ("dask", "--executor: unknown executor 'dask'; expected local, ray or ray:ADDRESS"),
    ("ray:", "--executor: unknown executor 'ray:'"),
    ("local:host", "--executor: unknown executor 'local:host'"),
    ("ray?gpus=1", "--executor: gpus: unknown option"),
    ("ray?cpus=x", "--executor: cpus: 'x' is not a number"),
    ("ray?memory=lots", "--executor: memory: 'lots' is not a size (e.g. 2G, 512M)"),
])
def test_bad_executor_specs_are_one_line(spec: str, message: str) -> None:
    assert message_of(InputError, ExecutorSpec.parse, spec).startswith(message)


def test_without_ray_the_command_says_how_to_install_it(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails as where it is not installed
    result = CliRunner().invoke(app, ["run", "harbor", "--data", str(HARBOR_EXAMPLES), "--student",
                                      f"replay:{HARBOR_REPLAY}", "--executor", "ray", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert result.output.strip() == ("error: --executor: Ray is not installed here: install it with "
                                     "`pip install 'unscaffold[ray]'`")


def test_inputs_are_shipped_and_specs_rebased(tmp_path: Path) -> None:
    bank = tmp_path / "bank"
    bank.mkdir()
    (bank / "manifest.toml").write_text("")
    reviews = tmp_path / "reviews.json"
    reviews.write_text("{}")
    config = RunConfig(suite="harbor", data=HARBOR_EXAMPLES, student=f"replay:{HARBOR_REPLAY}?latency=0.2",
                       reviewer=f"cascade:replay:{reviews}", harness=str(bank), knowledge=tmp_path / "missing",
                       out=tmp_path / "run")
    found = shipping.inputs(config)
    assert found == {"data": HARBOR_EXAMPLES.resolve(), "student": HARBOR_REPLAY.resolve(), "reviewer": reviews,
                     "harness": bank}  # a path that does not exist here is not shipped
    root = tmp_path / "node"
    shipping.unpack(shipping.pack(found), root)
    moved = shipping.rebased(config, root, set(found))
    assert str(moved.student) == f"replay:{root / 'student'}?latency=0.2"
    assert str(moved.reviewer) == f"cascade:replay:{root / 'reviewer'}"
    assert str(moved.harness) == str(root / "harness") and moved.data == root / "data"
    assert moved.knowledge == tmp_path / "missing"
    assert (root / "student").read_bytes() == HARBOR_REPLAY.read_bytes()
    assert (root / "data" / "hello-file" / "instruction.md").read_text() == \
        (HARBOR_EXAMPLES / "hello-file" / "instruction.md").read_text()


def test_a_trial_folder_round_trips_without_its_result(tmp_path: Path) -> None:
    trial = tmp_path / "trial"
    (trial / "workspace").mkdir(parents=True)
    (trial / "workspace" / "a.txt").write_text("a")
    (trial / "result.json").write_text("{}")
    (trial / "trajectory.json").write_text("[]")
    back = tmp_path / "back"
    back.mkdir()
    shipping.unpack(shipping.pack_folder(trial, exclude=frozenset({"result.json"})), back)
    assert sorted(str(p.relative_to(back)) for p in back.rglob("*")) == ["trajectory.json", "workspace",
                                                                          "workspace/a.txt"]
