"""Rescue GRPO on TRL: the harness environment, the row replacement, and real steps of the tiny model."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from tests.helpers import needs_bwrap
from unscaffold.benchmarks import load_suite
from unscaffold.cli import app
from unscaffold.errors import InputError
from unscaffold.knowledge.bank import load_bank
from unscaffold.knowledge.hstar import HStarHarness
from unscaffold.rescue.environment import EnvironmentContext, HarnessEnvironment, environment_class
from unscaffold.rescue.pool import load_pool, materialise
from unscaffold.rescue.trl_rescue import replace_rows


def _sibling(name: str, repairs: list[str], keep: list[str]) -> str:
    """One `[[siblings]]` entry of a pool file: an h* edit of the base that keeps these components."""
    return (f'[[siblings]]\nname = "{name}"\nparent = "base"\nrepairs = {json.dumps(repairs)}\n'
            f'[siblings.edit]\nsource = "hstar"\nkeep = {json.dumps(keep)}\n')


POOL = ('name = "two"\nsuite = "appworld_lite"\n'
        + _sibling("docs-first", ["wrong-parameter-names", "retry-without-doc"],
                   ["tool:api_doc", "memory:wrong-parameter-names"])
        + _sibling("submit-guard", ["never-submitted", "answer-not-passed"],
                   ["check:complete_before_finish", "memory:finish-without-answer"]))


def test_replace_rows_repads_and_takes_rows_in_order() -> None:
    base = {"prompt_ids": torch.tensor([[9, 1, 2], [9, 9, 3], [4, 5, 6], [9, 7, 8]]),
            "completion_ids": torch.tensor([[1, 0], [2, 0], [3, 3], [4, 0]]),
            "tool_mask": torch.ones(4, 2, dtype=torch.long), "advantages": torch.zeros(4),
            "num_items_in_batch": torch.tensor(5)}
    rescue = {"prompt_ids": torch.tensor([[1, 2, 3, 4], [9, 5, 6, 7]]),
              "completion_ids": torch.tensor([[5, 5, 5], [6, 0, 0]]),
              "tool_mask": torch.tensor([[1, 0, 1], [1, 1, 1]]), "advantages": torch.ones(2)}
    out = replace_rows(base, rescue, [2, 3], pad_token_id=9)
    assert out["prompt_ids"].tolist() == [[9, 9, 1, 2], [9, 9, 9, 3], [1, 2, 3, 4], [9, 5, 6, 7]]  # left padded
    assert out["completion_ids"].tolist() == [[1, 0, 9], [2, 0, 9], [5, 5, 5], [6, 0, 0]]  # right padded
    assert out["tool_mask"].tolist() == [[1, 1, 1], [1, 1, 1], [1, 0, 1], [1, 1, 1]]
    assert out["advantages"].tolist() == [0, 0, 1, 1]
    with pytest.raises(ValueError, match="multimodal"):
        replace_rows({**base, "pixel_values": torch.zeros(1)}, rescue, [0], 9)


@needs_bwrap
def test_sibling_environment_runs_the_harness_and_the_verifier(tmp_path: Path) -> None:
    suite = load_suite("appworld_lite")
    pool = materialise(load_pool(_write(tmp_path)), tmp_path / "pool")
    task = suite.tasks("train")[0]
    env_cls = environment_class(EnvironmentContext(
        suite=suite, tasks={task.id: task}, harness_name="docs-first",
        harness=HStarHarness(load_bank(pool.banks["docs-first"])), work_dir=tmp_path / "work"))
    assert issubclass(env_cls, HarnessEnvironment) and callable(env_cls.api_doc)
    env = env_cls()
    env.reset(task_id=task.id, prompt=[])
    assert env.execute(command="") == ("Format error: `execute` needs one non-empty string argument `command`.")
    assert "show_contacts" in env.api_doc(app_name="contacts")
    assert env.get_reward() == 0.0  # nothing was done
    env.reset(task_id=task.id)
    for command in suite.oracle_commands(task):
        env.execute(command=command)
    assert env.get_reward() == 1.0
    assert list((tmp_path / "work").iterdir()) == []  # each rollout's workspace goes away after scoring


def _write(tmp_path: Path) -> Path:
    path = tmp_path / "pool.toml"
    path.write_text(POOL)
    return path


@needs_bwrap
def test_rescue_train_tiny_model_rescues_and_learns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Real GRPOTrainer steps: the tiny model fails every base rollout, so every group is rescued; the
    verifier is wrapped so that rollouts under one sibling succeed, which makes the rescue groups mixed
    and their gradients non-zero."""
    monkeypatch.setenv("UNSCAFFOLD_CACHE", str(tmp_path / "cache"))
    original = HarnessEnvironment.get_reward

    def one_sibling_succeeds(self: HarnessEnvironment) -> float:
        reward = original(self)
        return 1.0 if self.context.harness_name == "submit-guard" else reward

    monkeypatch.setattr(HarnessEnvironment, "get_reward", one_sibling_succeeds)
    import unscaffold.rescue.trl_rescue as trl_rescue

    rescue_prompts: list[torch.Tensor] = []
    real_replace = trl_rescue.replace_rows

    def spy(base: dict, rescue: dict, rows: list[int], pad_token_id: int) -> dict:
        rescue_prompts.extend(rescue["prompt_ids"])
        return real_replace(base, rescue, rows, pad_token_id)

    monkeypatch.setattr(trl_rescue, "replace_rows", spy)
    rendered: list[tuple[str, list, list[int]]] = []  # (environment, prompt messages, prompt ids) as TRL rendered
    from trl import GRPOTrainer

    real_tokenize = GRPOTrainer._tokenize_prompts

    def tokenize_spy(self: GRPOTrainer, prompts: list) -> tuple:
        out = real_tokenize(self, prompts)
        rendered.extend(zip(self._batch_environments, prompts, [list(ids) for ids in out[0]], strict=True))
        return out

    monkeypatch.setattr(GRPOTrainer, "_tokenize_prompts", tokenize_spy)
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["rescue", "train", "appworld_lite", "--model", "tiny", "--pool",
                                      str(_write(tmp_path)), "--router", "random", "--max-steps", "4", "--k", "4",
                                      "--tasks-per-step", "1", "--steps-per-generation", "2",
                                      "--max-completion-length", "24", "--learning-rate", "0.01", "--out", str(out)])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [1, 2]  # two generation batches, each split into two steps
    trl_log = [json.loads(line) for line in (out / "trl_log.jsonl").read_text().splitlines()]
    assert [line["step"] for line in trl_log] == [1, 2, 3, 4]
    assert all("clip_ratio/region_mean" in line for line in trl_log)  # TRL's own clipped loss ("dapo")
    for line in lines:
        assert line["base_effective_group_rate"] == 0.0 and line["effective_group_rate"] == 1.0
        assert (line["rescued_groups"], line["rescue_success_rate"], line["rollouts"]) == (1, 1.0, 8)
        assert line["extra_rollout_pct"] == 100.0 and line["effective_token_share"] == 1.0
        assert sorted(line["rescue_harnesses"]) == ["docs-first"] * 2 + ["submit-guard"] * 2
    from safetensors.torch import load_file

    weights = load_file(str(out / "adapter" / "adapter_model.safetensors"))
    lora_b = [t for name, t in weights.items() if "lora_B" in name]
    assert lora_b and any(float(t.abs().sum()) > 0 for t in lora_b)  # LoRA B starts at zero: it moved
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["rescued_groups"], summary["method"], summary["rollouts"]) == (2, "random", 16)
    assert summary["notes"] == ["warning: the pool holds 2 siblings for top-k 4: every rescue group holds every "
                                "sibling, so the random router only chooses which sample more than once; give a "
                                "larger pool or a smaller --top-k"]
    from unscaffold.behaviors.labels import label_run

    label = label_run(tmp_path, {"student": f"hf:tiny+{out / 'adapter'}", "harness": "minimal"})
    assert (label.text, label.training.method, label.training.steps, label.training.rollouts) == (
        "rescue-trained + h", "random", 4, sum(line["rollouts"] for line in lines))
    # summary.json counts optimiser steps (--max-steps 4), and its record holds every rollout of the run
    assert (summary["steps"], summary["generation_batches"], summary["trained"]) == (4, 2, True)
    record = summary["record"]
    train_ids = [t.id for t in load_suite("appworld_lite").tasks("train")]
    assert (record["recipe"], record["method"], record["base_model"], record["train_tasks"]) == (
        "rescue", "random", "tiny", sorted(train_ids))
    assert record["cost"]["rollouts"] == {"collection": 0, "base": 8, "rescue": 8, "filler": 0, "reanchor": 0,
                                          "validation": 0}
    assert (record["cost"]["optimiser_steps"], record["cost"]["generation_batches"]) == (4, 2)
    assert record["cost"]["cpu_s"] > 0 and record["evaluation"]["max_turns"] == 40
    assert all(len(line["tasks"]) == 1 and line["tasks"][0] in train_ids for line in lines)
    # the rescue rows that train carry their sibling's context: its system prompt (memory) and its tools
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "cache" / "tiny" / "qwen3_5_think-seed0")
    texts = [tokenizer.decode(ids) for ids in rescue_prompts]
    assert len(texts) == 8 and all("## Lessons from earlier tasks" in t for t in texts)
    assert sum('"name": "api_doc"' in t for t in texts) == 4
    page = (out / "metrics.html").read_text()
    assert page.count("<svg") == 4 and "loss and reward" in page  # three rescue charts and TRL's loss and reward
    # train = deploy: each rollout's prompt is, token for token, what `unscaffold run --harness NAME` renders
    # for the same task and model (the hf: backend), for the base harness h and for a sibling
    from unscaffold.llm.hf_backend import HFModel
    from unscaffold.llm.types import Message
    from unscaffold.minimal_harness.harness import MinimalHarness

    banks = materialise(load_pool(_write(tmp_path)), tmp_path / "deploy-pool").banks
    harness_of = {"base": MinimalHarness(), **{n: HStarHarness(load_bank(b)) for n, b in banks.items()}}
    deployed = HFModel("hf:tiny", str(tmp_path / "cache" / "tiny" / "qwen3_5_think-seed0"))
    instructions = {t.id: t.instruction for t in load_suite("appworld_lite").tasks("train")}
    assert {env for env, _, _ in rendered} == {"base", "docs-first", "submit-guard"}
    for env, prompt, ids in rendered:
        harness = harness_of[env]
        assert prompt[0] == {"role": "system", "content": harness.system_prompt()}
        assert prompt[1]["role"] == "user" and prompt[1]["content"] in instructions.values()
        messages = [Message(role="system", content=harness.system_prompt()),
                    Message(role="user", content=prompt[1]["content"])]
        assert ids == deployed.prompt_ids(messages, harness.tools()), env


def test_rescue_train_bad_input_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["rescue", "train", "appworld_lite", "--model", "/nowhere", "--router",
                                      "random", "--out", str(tmp_path / "unused-rescue-run")])
    assert result.exit_code == 2
    assert result.output == ("error: --model /nowhere: no model folder /nowhere: give a checkpoint folder, a "
                             "Hugging Face id, or `tiny`\n")
    result = CliRunner().invoke(app, ["rescue", "train", "appworld_lite", "--model", "/nowhere", "--no-preflight",
                                      "--router", "random", "--out", str(tmp_path / "unused-rescue-run")])
    assert result.output.strip().splitlines()[-1] == ("error: --model: /nowhere: not a model folder (no "
                                                      "config.json); give a local checkpoint, a Hugging Face id or "
                                                      "`tiny`")
    result = CliRunner().invoke(app, ["rescue", "train", "appworld_lite", "--model", "tiny", "--router", "best",
                                      "--out", str(tmp_path / "unused-rescue-run")])
    assert (result.exit_code, result.output) == (2, "error: --router: Input should be 'none', 'same', 'fixed', "
                                                    "'random', 'rule' or 'adaptive'\n")


@needs_bwrap
def test_rule_router_reanchors_on_the_current_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At every step the checkpoint runs the validation task under base and each sibling, and the rule
    router learns from those runs instead of the table it started with."""
    monkeypatch.setenv("UNSCAFFOLD_CACHE", str(tmp_path / "cache"))
    val = load_suite("appworld_lite").tasks("train")[-1]
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"tasks": [{"task_id": val.id, "text": val.instruction,
                                            "rewards": {"base": [0.0], "submit-guard": [1.0]}}]}))
    out = tmp_path / "run"
    result = CliRunner().invoke(app, [
        "rescue", "train", "appworld_lite", "--model", "tiny", "--pool", str(_write(tmp_path)), "--router", "rule",
        "--validation", str(table), "--max-steps", "2", "--k", "2", "--max-completion-length", "16",
        "--tasks-per-step", "1", "--steps-per-generation", "1",
        "--reanchor-every", "1", "--reanchor-tasks", val.id, "--reanchor-max-turns", "1",
        "--reanchor-max-new-tokens", "8", "--out", str(out)])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [line["router_anchors"] for line in lines] == [1, 2]  # step 2 routed with the step-1 re-anchoring
    assert [line["rescue_harnesses"] for line in lines][0] == ["submit-guard", "docs-first"]
    for step in (1, 2):
        runs = out / "reanchor" / f"step-{step}"
        assert sorted(p.name for p in runs.iterdir()) == ["base", "docs-first", "submit-guard"]
        assert (runs / "base" / "trials" / val.id / "result.json").is_file()
        assert (out / "checkpoints" / f"step-{step}" / "adapter_config.json").is_file()
    # router.json: the router after the last re-anchoring, ranking the training tasks as at the end
    from unscaffold.rescue.router_loader import load_router
    from unscaffold.rescue.routers import TaskView

    state = json.loads((out / "router.json").read_text())
    assert (state["router"], state["anchors"]) == ("rule", 3)
    restored = load_router(str(out / "router.json"), ["docs-first", "submit-guard"], None)
    texts = {t.id: t.instruction for t in load_suite("appworld_lite").tasks("train")}
    assert state["rankings"] and all(restored.rank(TaskView(task_id=tid, text=texts[tid])) == ranking
                                     for tid, ranking in state["rankings"].items())


@needs_bwrap
@pytest.mark.parametrize("method", ["none", "same"])
def test_published_controls_with_the_tiny_model(method: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`none` is plain GRPO (the tiny model fails every base rollout, and nothing is rescued); `same`
    re-samples the failed group K more times under the base harness, never under a sibling."""
    monkeypatch.setenv("UNSCAFFOLD_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["rescue", "train", "appworld_lite", "--model", "tiny", "--pool",
                                      str(_write(tmp_path)), "--router", method, "--max-steps", "1", "--k", "2",
                                      "--tasks-per-step", "1", "--steps-per-generation", "1",
                                      "--max-completion-length", "16", "--out", str(out)])
    assert result.exit_code == 0, result.output
    [line] = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    summary = json.loads((out / "summary.json").read_text())
    assert (line["method"], summary["method"]) == (method, method)
    # every rollout of the tiny model fails: no group teaches anything, and the summary says so
    assert (summary["trained"], summary["not_trained_reason"], summary["effective_groups"]) == (
        False, "no effective group: every group's rewards were equal, so every advantage and every gradient was "
        "zero", 0)
    assert "warning: not trained: no effective group" in result.output
    if method == "none":
        assert (line["rescued_groups"], line["extra_rollout_pct"], line["rollouts"], line["rescue_harnesses"]) == (
            0, 0.0, 2, [])
        assert (summary["rescued_groups"], summary["extra_rollout_pct"]) == (0, 0.0)
    else:
        assert (line["rescued_groups"], line["extra_rollout_pct"], line["rollouts"], line["rescue_harnesses"]) == (
            1, 100.0, 4, ["base", "base"])
        assert (summary["rescued_groups"], summary["extra_rollout_pct"]) == (1, 100.0)


def test_control_routers_pick_their_fixed_harnesses() -> None:
    from unscaffold.rescue.routers import TaskView
    from unscaffold.rescue.train import RescueTrainConfig, build_router, fixed_mixture, pool_notes, rescue_harnesses

    siblings = ["docs-first", "submit-guard", "page-all"]
    task = TaskView(task_id="t", text="anything")
    config = RescueTrainConfig(suite="appworld_lite", model="tiny", out=Path("/unused"), router="same")
    assert rescue_harnesses(build_router(config, siblings), task, 4) == ["base"] * 4
    # the fixed mixture spreads every group's rollouts over base and the pool, not only rescue groups
    assert fixed_mixture(siblings, 8) == ["base", "docs-first", "submit-guard", "page-all"] * 2
    fixed = RescueTrainConfig(suite="appworld_lite", model="tiny", out=Path("/u"), router="fixed")
    assert pool_notes(fixed, siblings) == ["fixed mixture: every group's 8 rollouts under base, docs-first, "
                                           "submit-guard, page-all, base, docs-first, submit-guard, page-all (no "
                                           "rescue step)"]


def test_environment_methods_carry_their_harness_schemas(tmp_path: Path) -> None:
    """transformers builds a method's schema from its docstring: `execute`'s is the harness's EXECUTE_TOOL
    key for key (no `return` entry, one-line description), and a bank tool's is the bank's schema."""
    from transformers.utils import get_json_schema

    from unscaffold.knowledge.hstar import tool_schema
    from unscaffold.minimal_harness.tool import EXECUTE_TOOL
    from unscaffold.rescue.environment import tool_method

    assert get_json_schema(HarnessEnvironment.execute) == EXECUTE_TOOL
    bank = load_bank(materialise(load_pool(_write(tmp_path)), tmp_path / "pool").banks["docs-first"])
    [api_doc] = bank.manifest.tools
    schema = get_json_schema(tool_method(api_doc))
    assert schema["function"]["name"] == "api_doc" and "return" not in schema["function"]
    assert schema["function"]["parameters"]["required"] == tool_schema(api_doc)["function"]["parameters"]["required"]


def test_options_the_trainer_cannot_honour_are_refused_before_loading(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["rescue", "train", "appworld_lite", "--model", "tiny", "--k", "3",
                                      "--tasks-per-step", "1", "--steps-per-generation", "2", "--out",
                                      str(tmp_path / "unused-rescue-run")])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1] == ("error: --steps-per-generation: 2 does not divide the 3 "
                                                      "rollouts of a generation batch (K 3 x 1 tasks)")
    result = CliRunner().invoke(app, ["rescue", "train", "appworld_lite", "--model", "tiny", "--use-vllm",
                                      "--vllm-mode", "server", "--no-preflight", "--out",
                                      str(tmp_path / "unused-rescue-run")])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1].startswith("error: --vllm-mode: server mode is not supported")


@needs_bwrap
def test_rollouts_write_to_the_bounded_trial_filesystem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rollout's disk is bounded as a `run` trial's is: a write past the bound fails inside the sandbox,
    and nothing of the rollout stays on the host."""
    import os

    from tests.test_hostile_runs import HONEST_VERIFIER, harbor_task
    from unscaffold.minimal_harness.harness import MinimalHarness
    from unscaffold.minimal_harness.sandbox import disk
    from unscaffold.rescue import environment

    if os.geteuid() != 0 or disk._tool("mkfs.ext4") is None:
        pytest.skip("a filesystem of the trial's own is made only as root, with mkfs.ext4")
    opened: list[disk.TrialDisk | None] = []

    def small_disk(config):  # the bound `run` uses, made small enough to reach in a test
        config.limits.workspace_bytes = 64 * 1024**2
        opened.append(disk.open_trial_disk(config))
        return opened[-1]

    monkeypatch.setattr(environment, "open_trial_disk", small_disk)
    harbor_task(tmp_path / "tasks", "t", HONEST_VERIFIER)
    suite = load_suite("harbor", tmp_path / "tasks")
    task = suite.tasks()[0]
    env = environment_class(EnvironmentContext(suite=suite, tasks={task.id: task}, harness_name="minimal",
                                               harness=MinimalHarness(), work_dir=tmp_path / "work"))()
    env.reset(task_id=task.id)
    assert opened[0] is not None and opened[0].kind == "an ext4 image of 0.0625 GiB"
    observation = env.execute(command="head -c 100M /dev/zero > fill; echo rc=$?; rm fill; echo ok > out.txt")
    assert "No space left on device" in observation and "rc=1\n" in observation
    assert env.execute(command="echo \udfff > out.txt") == (  # nothing of it runs, and the transcript keeps it
        "Format error: the tool arguments cannot be encoded as UTF-8 (it holds a lone surrogate).")
    assert env.get_reward() == 1.0  # the workspace works once the space is freed
    assert list((tmp_path / "work").iterdir()) == []
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    assert [m for m in mounts if m.startswith(str(tmp_path)) or f"unscaffold-disk-{os.getpid()}-" in m] == []


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
@pytest.mark.parametrize("preflight", [[], ["--no-preflight"]])
def test_use_vllm_without_vllm_is_one_line(tmp_path: Path, preflight: list[str]) -> None:
    """The preflight names it; without the preflight the trainer still refuses before loading anything."""
    result = CliRunner().invoke(app, ["rescue", "train", "appworld_lite", "--model", "tiny", "--use-vllm",
                                      *preflight, "--out", str(tmp_path / "unused-rescue-run")])
    assert (result.exit_code, result.output) == (
        2, "error: --use-vllm: vLLM is not installed: `pip install 'unscaffold[vllm]'` on a machine with a GPU, or "
        "leave --use-vllm out (rollouts then generate with transformers)\n")
    assert not (tmp_path / "unused-rescue-run").exists()


def test_a_hub_id_is_taken_as_train_sft_takes_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--model org/name` resolves through the Hugging Face cache (offline here: a cached snapshot)."""
    from unscaffold.rescue.train import resolve_model

    repo = tmp_path / "hub" / "models--example--tiny-chat"
    snapshot = repo / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text('{"model_type": "qwen3"}')
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abcd")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import huggingface_hub.constants as hub

    monkeypatch.setattr(hub, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", True)
    assert resolve_model("example/tiny-chat") == snapshot
    with pytest.raises(InputError) as e:
        resolve_model("example/not-cached")
    assert str(e.value).startswith("--model: example/not-cached: not a folder here and the Hugging Face hub cannot "
                                   "give it (")


@needs_bwrap
def test_fixed_mixture_spreads_every_group_over_the_pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The published fixed-mixture control samples every group's rollouts under base and the siblings in pool
    order (not only the groups that failed), and never rescues."""
    monkeypatch.setenv("UNSCAFFOLD_CACHE", str(tmp_path / "cache"))
    scored: list[str] = []
    original = HarnessEnvironment.get_reward

    def spy(self: HarnessEnvironment) -> float:
        scored.append(self.context.harness_name)
        return original(self)

    monkeypatch.setattr(HarnessEnvironment, "get_reward", spy)
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["rescue", "train", "appworld_lite", "--model", "tiny", "--pool",
                                      str(_write(tmp_path)), "--router", "fixed", "--max-steps", "1", "--k", "4",
                                      "--tasks-per-step", "1", "--steps-per-generation", "1",
                                      "--max-completion-length", "16", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert sorted(scored) == ["base", "base", "docs-first", "submit-guard"]
    [line] = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert (line["rescued_groups"], line["rollouts"], line["method"]) == (0, 4, "fixed")


@needs_bwrap
def test_warm_start_trains_on_from_an_adapter_and_counts_its_cost(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """`--init-adapter` continues a LoRA adapter (a short SFT, say): the run's record adds the warm start's
    cost (its collection, its optimiser steps) to its own."""
    monkeypatch.setenv("UNSCAFFOLD_CACHE", str(tmp_path / "cache"))
    from peft import LoraConfig, get_peft_model
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from unscaffold.iojson import write_json_atomic
    from unscaffold.offline.tiny import resolve_model_path
    from unscaffold.training_record import Rollouts, TrainingCost, TrainingRecord

    warm = tmp_path / "warm"
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(resolve_model_path("tiny")),
                           LoraConfig(r=4, lora_alpha=4, target_modules="all-linear", task_type="CAUSAL_LM"))
    model.save_pretrained(str(warm))
    start = load_file(str(warm / "adapter_model.safetensors"))
    write_json_atomic(warm / "summary.json", {"record": TrainingRecord(
        recipe="sft", base_model="tiny", base_model_path=resolve_model_path("tiny"), train_tasks=["t"],
        evaluation={}, trained=True, cost=TrainingCost(rollouts=Rollouts(collection=8), reviewer_calls=40,
                                                       optimiser_steps=300)).model_dump(mode="json")})
    out = tmp_path / "run"
    args = ["rescue", "train", "appworld_lite", "--model", "tiny", "--pool", str(_write(tmp_path)), "--router",
            "random", "--max-steps", "1", "--k", "2", "--tasks-per-step", "1", "--steps-per-generation", "1",
            "--max-completion-length", "16", "--out", str(out)]
    result = CliRunner().invoke(app, [*args, "--init-adapter", str(warm)])
    assert result.exit_code == 0, result.output
    record = json.loads((out / "summary.json").read_text())["record"]
    assert (record["warm_start"], record["cost"]["optimiser_steps"], record["cost"]["reviewer_calls"]) == (
        str(warm), 301, 40)
    assert (record["cost"]["rollouts"]["collection"], record["cost"]["rollouts"]["base"]) == (8, 2)
    saved = load_file(str(out / "adapter" / "adapter_model.safetensors"))
    assert sorted(saved) == sorted(start)  # the same adapter (rank 4), trained on
    result = CliRunner().invoke(app, [*args, "--init-adapter", str(tmp_path)])
    assert (result.exit_code, result.output.strip().splitlines()[-1]) == (
        2, f"error: --init-adapter: {tmp_path}: not a LoRA adapter folder (no adapter_config.json)")
