"""Option specs: every spelling of `--student`, `--reviewer`, `--harness`, `--executor`, `--base-image` and
`--model` parses once into a typed spec, gives its canonical text back, and is written to config.json as an
object; a config.json of an earlier version, which holds the text, still reads and resumes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.helpers import HARBOR_EXAMPLES, HARBOR_REPLAY, message_of, needs_bwrap
from unscaffold.behaviors.labels import label_run
from unscaffold.cli import app
from unscaffold.errors import InputError
from unscaffold.evolve.config import EvolveConfig
from unscaffold.llm.sampling import Sampling
from unscaffold.minimal_harness.sandbox.base import SandboxSettings
from unscaffold.run.models import RunConfig
from unscaffold.sft.build import run_source
from unscaffold.specs import BaseImageSpec, ExecutorSpec, HarnessSpec, ModelSpec, ReviewerSpec, Spec, WeightsSpec

MODEL_USAGE = "expected one of openai:MODEL[@BASE_URL], anthropic:MODEL, hf:PATH[+ADAPTER], replay:FILE"

PARSED: list[tuple[type[Spec], str, dict[str, Any]]] = [
    (ModelSpec, "openai:gpt-5", {"kind": "openai", "target": "gpt-5"}),
    (ModelSpec, "openai:Qwen/Qwen3-8B@http://localhost:8000/v1?temperature=0.7&top_p=0.95&max_tokens=1024&seed=1"
     "&server=vllm", {"kind": "openai", "target": "Qwen/Qwen3-8B", "base_url": "http://localhost:8000/v1",
                      "sampling": {"temperature": 0.7, "top_p": 0.95, "max_tokens": 1024, "seed": 1},
                      "server": "vllm"}),
    (ModelSpec, "anthropic:claude-sonnet-4-5?temperature=0.2", {
        "kind": "anthropic", "target": "claude-sonnet-4-5",
        "sampling": {"temperature": 0.2, "top_p": None, "max_tokens": None, "seed": None}}),
    (ModelSpec, "hf:tiny:qwen3+runs/sft?max_tokens=320", {
        "kind": "hf", "target": "tiny:qwen3", "adapter": "runs/sft",
        "sampling": {"temperature": None, "top_p": None, "max_tokens": 320, "seed": None}}),
    (ModelSpec, "replay:examples/replay/harbor_student.json?latency=0.5", {
        "kind": "replay", "target": "examples/replay/harbor_student.json", "latency_s": 0.5}),
    (ReviewerSpec, "passthrough", {"kind": "passthrough"}),
    (ReviewerSpec, "rules", {"kind": "rules"}),
    (ReviewerSpec, "replay:reviews.json", {"kind": "model", "model": {"kind": "replay", "target": "reviews.json"}}),
    (ReviewerSpec, "cascade:openai:gpt-5@http://h/v1", {"kind": "cascade", "inner": {
        "kind": "model", "model": {"kind": "openai", "target": "gpt-5", "base_url": "http://h/v1"}}}),
    (ReviewerSpec, "cascade:rules", {"kind": "cascade", "inner": {"kind": "rules"}}),
    (HarnessSpec, "minimal", {"kind": "minimal"}),
    (HarnessSpec, "hstar", {"kind": "hstar"}),
    (HarnessSpec, "banks/evolved", {"kind": "bank", "path": "banks/evolved"}),
    (HarnessSpec, "route:shipped", {"kind": "route", "path": "shipped"}),
    (HarnessSpec, "route:pools/pool.toml", {"kind": "route", "path": "pools/pool.toml"}),
    (ExecutorSpec, "local", {"kind": "local"}),
    (ExecutorSpec, "ray", {"kind": "ray"}),
    (ExecutorSpec, "ray:auto", {"kind": "ray", "address": "auto"}),
    (ExecutorSpec, "ray:ray://head:10001?cpus=0.5&memory=2G", {"kind": "ray", "address": "ray://head:10001",
                                                              "cpus": 0.5, "memory_bytes": 2 * 2**30}),
    (ExecutorSpec, "local?memory=512M", {"kind": "local", "memory_bytes": 512 * 2**20}),
    (BaseImageSpec, "ubuntu:24.04=unscaffold-base:0123", {"image": "ubuntu:24.04", "local": "unscaffold-base:0123"}),
    (WeightsSpec, "tiny", {"kind": "tiny", "name": "tiny"}),
    (WeightsSpec, "tiny:qwen3", {"kind": "tiny", "name": "tiny", "template": "qwen3"}),
    (WeightsSpec, "tiny-qwen3.5", {"kind": "tiny", "name": "tiny-qwen3.5"}),
    (WeightsSpec, "tiny-wide:qwen3", {"kind": "tiny", "name": "tiny-wide", "template": "qwen3"}),
    (WeightsSpec, "smollm2-135m", {"kind": "smollm", "name": "smollm2-135m"}),
    (WeightsSpec, "Qwen/Qwen3-8B", {"kind": "path", "name": "Qwen/Qwen3-8B"}),
]


@pytest.mark.parametrize(("spec", "text", "stored"), PARSED, ids=[text for _, text, _ in PARSED])
def test_each_spelling_parses_to_its_typed_spec_and_back(spec: type[Spec], text: str, stored: dict[str, Any]) -> None:
    parsed = spec.parse(text)
    assert parsed.model_dump(mode="json") == stored  # only the fields that say something
    assert str(parsed) == text  # canonical spellings come back as given
    assert spec.model_validate(stored) == parsed == spec.model_validate(text)  # the object, or the earlier text


@pytest.mark.parametrize(("spec", "given", "canonical"), [
    (ModelSpec, "hf:tiny?max_new_tokens=7&temperature=1.0", "hf:tiny?temperature=1&max_tokens=7"),
    (ModelSpec, "openai:m?server=sglang&seed=3", "openai:m?seed=3&server=sglang"),
    (ModelSpec, "replay:f.json?latency=0", "replay:f.json"),
    (HarnessSpec, "route:", "route:shipped"),
    (ExecutorSpec, "ray?cpus=1&memory=1024MiB", "ray?memory=1G"),
    (BaseImageSpec, " golang:1.22 = go:1 ", "golang:1.22=go:1"),
    (WeightsSpec, "tiny:", "tiny"),
])
def test_other_spellings_still_parse_and_read_back_canonically(spec: type[Spec], given: str, canonical: str) -> None:
    assert str(spec.parse(given)) == canonical
    assert spec.parse(canonical) == spec.parse(given)


def test_oracle_is_a_students_spec_only() -> None:
    assert ModelSpec.parse("oracle", oracle=True).model_dump(mode="json") == {"kind": "oracle"}
    assert str(ModelSpec(kind="oracle")) == "oracle"
    assert message_of(InputError, ModelSpec.parse, "oracle") == f"--student: unknown model spec 'oracle'; {MODEL_USAGE}"
    assert ModelSpec.model_validate("oracle") == ModelSpec(kind="oracle")  # a stored student reads


@pytest.mark.parametrize(("spec", "text", "message"), [
    (ModelSpec, "gpt-5", f"--student: unknown model spec 'gpt-5'; {MODEL_USAGE}"),
    (ModelSpec, "openai:?temperature=1", "--student: model spec 'openai:?temperature=1' names no model"),
    (ModelSpec, "openai:m?server=tgi", "--student: openai server 'tgi' is not one of vllm, sglang"),
    (ModelSpec, "hf:tiny?max_new_token=7", "--student: unknown hf option 'max_new_token'; expected temperature=, "
     "top_p=, max_tokens=, seed="),
    (ModelSpec, "anthropic:c?top_p=2", "--student: anthropic top_p '2': Input should be less than or equal to 1"),
    (ModelSpec, "replay:f?speed=2", "--student: unknown replay option 'speed'; only latency=SECONDS"),
    (ModelSpec, "replay:f?latency=soon", "--student: replay latency 'soon' is not a number"),
    (ReviewerSpec, "gpt-5", "--reviewer: unknown reviewer spec 'gpt-5'; expected passthrough, rules, cascade:SPEC, "
     "replay:FILE, openai:MODEL[@BASE_URL], anthropic:MODEL or hf:PATH[+ADAPTER]"),
    (ReviewerSpec, "cascade:", "--reviewer: reviewer spec 'cascade:': cascade wraps one reviewer spec, e.g. "
     "cascade:openai:MODEL"),
    (ReviewerSpec, "cascade:cascade:rules", "--reviewer: reviewer spec 'cascade:cascade:rules': cascade wraps one "
     "reviewer spec, e.g. cascade:openai:MODEL"),
    (ReviewerSpec, "openai:", f"--reviewer: unknown model spec 'openai:'; {MODEL_USAGE}"),
    (HarnessSpec, " ", "--harness: no harness named; expected minimal, hstar, a bank folder or route:POOL"),
    (ExecutorSpec, "dask", "--executor: unknown executor 'dask'; expected local, ray or ray:ADDRESS (e.g. "
     "ray:auto, ray://HOST:10001), optionally ?cpus=N&memory=SIZE"),
    (ExecutorSpec, "ray?cpus=-1", "--executor: cpus: must be >= 0"),
    (BaseImageSpec, "ubuntu:24.04", "--base-image: 'ubuntu:24.04' is not IMAGE=LOCAL_IMAGE"),
    (WeightsSpec, "", "--model: expected a path, a hub id, tiny[:TEMPLATE] or smollm2-135m"),
    # a near miss of a word or a prefix names the spelling meant, the rest of the text kept
    (ModelSpec, "opnai:gpt-5", f"--student: unknown model spec 'opnai:gpt-5'; {MODEL_USAGE}; did you mean "
     "openai:gpt-5?"),
    (ReviewerSpec, "passthru", "--reviewer: unknown reviewer spec 'passthru'; expected passthrough, rules, "
     "cascade:SPEC, replay:FILE, openai:MODEL[@BASE_URL], anthropic:MODEL or hf:PATH[+ADAPTER]; did you mean "
     "passthrough?"),
    (HarnessSpec, "hstr", "--harness: unknown harness 'hstr'; expected minimal, hstar, a bank folder or route:POOL; "
     "did you mean hstar?"),
    (HarnessSpec, "rote:shipped", "--harness: unknown harness 'rote:shipped'; expected minimal, hstar, a bank folder "
     "or route:POOL; did you mean route:shipped?"),
    (ExecutorSpec, "rey", "--executor: unknown executor 'rey'; expected local, ray or ray:ADDRESS (e.g. "
     "ray:auto, ray://HOST:10001), optionally ?cpus=N&memory=SIZE; did you mean ray?"),
])
def test_bad_specs_are_one_line_naming_the_option(spec: type[Spec], text: str, message: str) -> None:
    assert message_of(InputError, spec.parse, text) == message


def test_a_student_near_oracle_is_told_so_and_a_bank_folder_near_a_word_is_a_bank(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert message_of(InputError, lambda t: ModelSpec.parse(t, oracle=True), "oracl") == (
        f"--student: unknown model spec 'oracl'; {MODEL_USAGE}; did you mean oracle?")
    (tmp_path / "hstr").mkdir()  # a folder of that name is a bank folder, not a typo
    monkeypatch.chdir(tmp_path)
    assert HarnessSpec.parse("hstr") == HarnessSpec(kind="bank", path="hstr")
    assert HarnessSpec.parse("my-bank") == HarnessSpec(kind="bank", path="my-bank")  # far from every word


def test_a_field_names_its_own_option() -> None:
    with pytest.raises(InputError) as raised:
        EvolveConfig.model_validate({"suite": "harbor", "student": "oracle", "editor": "gpt-5", "base": "b",
                                     "out": "o"})
    assert str(raised.value) == f"--editor: unknown model spec 'gpt-5'; {MODEL_USAGE}"
    config = EvolveConfig.model_validate({"suite": "harbor", "student": "hf:tiny", "editor": "replay:e.json",
                                          "base": "b", "out": "o"})
    assert (config.student, config.analyst_spec) == (ModelSpec(kind="hf", target="tiny"),
                                                     ModelSpec(kind="replay", target="e.json"))
    assert (config.identity()["student"], config.identity()["editor"]) == ("hf:tiny", "replay:e.json")


def test_the_sandbox_settings_hold_base_images_typed() -> None:
    settings = SandboxSettings.model_validate({"base_images": "ubuntu:24.04=base:1,golang:1.22=go:1"})
    assert settings.base_images == [BaseImageSpec(image="ubuntu:24.04", local="base:1"),
                                    BaseImageSpec(image="golang:1.22", local="go:1")]
    assert settings.model_dump(mode="json")["base_images"] == [{"image": "ubuntu:24.04", "local": "base:1"},
                                                               {"image": "golang:1.22", "local": "go:1"}]
    assert SandboxSettings.model_validate(settings.model_dump(mode="json")) == settings


EARLIER = {"suite": "harbor", "student": "replay:s.json?latency=0.2", "reviewer": "cascade:replay:r.json",
           "harness": "route:shipped", "executor": "ray:auto?cpus=2", "out": "run", "max_turns": 7,
           "base_images": ["a=b"]}


def test_a_config_json_of_an_earlier_version_reads_as_typed_specs() -> None:
    config = RunConfig.model_validate(EARLIER)
    assert config.student == ModelSpec(kind="replay", target="s.json", latency_s=0.2)
    assert config.reviewer == ReviewerSpec(kind="cascade", inner=ReviewerSpec(
        kind="model", model=ModelSpec(kind="replay", target="r.json")))
    assert config.harness == HarnessSpec(kind="route", path="shipped")
    assert config.executor == ExecutorSpec(kind="ray", address="auto", cpus=2.0)
    assert config.sandbox.base_images == [BaseImageSpec(image="a", local="b")]
    written = config.model_dump(mode="json")
    assert {k: written[k] for k in ("student", "reviewer", "harness", "executor")} == {
        "student": {"kind": "replay", "target": "s.json", "latency_s": 0.2},
        "reviewer": {"kind": "cascade", "inner": {"kind": "model", "model": {"kind": "replay", "target": "r.json"}}},
        "harness": {"kind": "route", "path": "shipped"},
        "executor": {"kind": "ray", "address": "auto", "cpus": 2.0}}
    assert RunConfig.model_validate(written) == config
    assert RunConfig.identity_of(EARLIER) == RunConfig.identity_of(written) == config.identity()


def test_labels_and_row_sources_read_both_shapes(tmp_path: Path) -> None:
    typed = RunConfig.model_validate({**EARLIER, "harness": "banks/evolved", "student": "hf:base"})
    for shape in ({**EARLIER, "harness": "banks/evolved", "student": "hf:base"}, typed.model_dump(mode="json")):
        label = label_run(tmp_path, shape)
        assert (label.text, label.model, label.reviewer) == ("base + h* (evolved) + reviewer", "hf:base",
                                                              "cascade:replay:r.json")
        (tmp_path / "config.json").write_text(json.dumps(shape))
        assert run_source(tmp_path) == "hstar"
    (tmp_path / "config.json").write_text(json.dumps(RunConfig.model_validate(
        {"suite": "harbor", "student": "oracle", "out": "run"}).model_dump(mode="json")))
    assert run_source(tmp_path) == "unreviewed"


def invoke(*argv: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(argv))
    return result.exit_code, result.output


@pytest.mark.parametrize(("flag", "value", "message"), [
    ("--student", "gpt-5", f"--student: unknown model spec 'gpt-5'; {MODEL_USAGE}"),
    ("--reviewer", "cascade:", "--reviewer: reviewer spec 'cascade:': cascade wraps one reviewer spec, e.g. "
     "cascade:openai:MODEL"),
    ("--executor", "ray?gpus=1", "--executor: gpus: unknown option; expected local, ray or ray:ADDRESS (e.g. "
     "ray:auto, ray://HOST:10001), optionally ?cpus=N&memory=SIZE"),
    ("--harness", "", "--harness: no harness named; expected minimal, hstar, a bank folder or route:POOL"),
    ("--base-image", "x", "--base-image: 'x' is not IMAGE=LOCAL_IMAGE"),
])
def test_a_bad_option_is_one_line_exit_2(flag: str, value: str, message: str, tmp_path: Path) -> None:
    argv = {"--student": "oracle", flag: value}
    assert invoke("run", "harbor", *(part for pair in argv.items() for part in pair), "--out",
                  str(tmp_path / "run")) == (2, f"error: {message}\n")
    assert not (tmp_path / "run").exists()


@needs_bwrap
def test_a_run_writes_typed_specs_and_resumes_an_earlier_text_config(tmp_path: Path) -> None:
    run = tmp_path / "run"
    argv = ["run", "harbor", "--data", str(HARBOR_EXAMPLES), "--student", f"replay:{HARBOR_REPLAY}", "--tasks",
            "hello-file", "--base-image", "a=b", "--no-preflight", "--out", str(run)]
    code, out = invoke(*argv)
    assert code == 0, out
    written = json.loads((run / "config.json").read_text())
    assert {k: written[k] for k in ("student", "reviewer", "harness", "executor")} == {
        "student": {"kind": "replay", "target": str(HARBOR_REPLAY)}, "reviewer": None,
        "harness": {"kind": "minimal"}, "executor": {"kind": "local"}}
    assert written["sandbox"]["base_images"] == [{"image": "a", "local": "b"}]
    results = json.loads((run / "results.json").read_text())
    assert (results["student"], results["harness"], results["reviewer"]) == (f"replay:{HARBOR_REPLAY}", "minimal",
                                                                             None)
    earlier = {**written, "student": f"replay:{HARBOR_REPLAY}", "harness": "minimal", "executor": "local",
               "sandbox": {**written["sandbox"], "base_images": ["a=b"]}}
    (run / "config.json").write_text(json.dumps(earlier))
    code, out = invoke(*argv)  # the same run: resumed (nothing left to run), config.json rewritten typed
    assert code == 0, out
    assert json.loads((run / "config.json").read_text()) == written
    code, out = invoke(*argv[:-2], "--harness", "hstar", "--out", str(run))
    assert code == 2 and out == f"error: {run / 'config.json'}: harness: the run in {run} was started with other " \
                                "settings (harness); use another --out\n"


def test_sampling_settings_are_a_model_specs_own() -> None:
    spec = ModelSpec.parse("openai:m?temperature=0")
    assert spec.sampling == Sampling(temperature=0.0) and str(spec) == "openai:m?temperature=0"


def test_a_bad_spec_in_a_config_file_names_the_file_and_key(tmp_path: Path) -> None:
    settings = tmp_path / "run.toml"
    settings.write_text('student = "oracle"\nexecutor = "dask"\n')
    assert invoke("run", "harbor", "--config", str(settings), "--out", str(tmp_path / "run")) == (
        2, f"error: {settings}: executor: unknown executor 'dask'; expected local, ray or ray:ADDRESS (e.g. ray:auto, "
        "ray://HOST:10001), optionally ?cpus=N&memory=SIZE\n")
    settings.write_text('student = {kind = "hf", target = "tiny", adapter = "runs/sft"}\n')
    assert invoke("run", "harbor", "--config", str(settings), "--executor", "ray:", "--out",
                  str(tmp_path / "run")) == (2, "error: --executor: unknown executor 'ray:'; expected local, ray or "
                                                "ray:ADDRESS (e.g. ray:auto, ray://HOST:10001), optionally "
                                                "?cpus=N&memory=SIZE; did you mean ray?\n")


@pytest.mark.parametrize("argv", [
    ["demo", "--hstar-student", "gpt-5"],
    ["evolve", "harbor", "--student", "oracle", "--editor", "gpt-5", "--base", "b", "--out", "ev"],
    ["rescue", "route", "harbor", "--student", "oracle", "--voter", "gpt-5", "--out", "rr"],
    ["reproduce", "harness-zero", "--suite", "retrosynthesis", "--student", "gpt-5", "--dry-run"],
])
def test_every_command_parses_its_model_specs_first(argv: list[str]) -> None:
    flag = argv[argv.index("gpt-5") - 1]
    assert invoke(*argv) == (2, f"error: {flag}: unknown model spec 'gpt-5'; {MODEL_USAGE}\n")


def test_the_demo_runs_its_shipped_specs_as_before() -> None:
    from unscaffold.demo import REPLAYS, DemoConfig

    config = DemoConfig()
    assert config.shipped()
    assert (str(config.student), str(config.hstar_student), str(config.reviewer)) == (
        f"replay:{REPLAYS / 'demo_student_h.json'}", f"replay:{REPLAYS / 'demo_student_hstar.json'}",
        f"replay:{REPLAYS / 'demo_reviewer.json'}")
    assert not DemoConfig(student=f"replay:{REPLAYS / 'demo_reviewer.json'}").shipped()


def test_the_weights_options_are_typed() -> None:
    from unscaffold.command_settings import InspectSftSettings, MergeSettings
    from unscaffold.offline.tiny import is_built_in

    assert InspectSftSettings.model_validate({"data": "d.jsonl", "model": "tiny:qwen3"}).model == WeightsSpec(
        kind="tiny", name="tiny", template="qwen3")
    assert MergeSettings.model_validate({"adapter": "a", "out": "o", "base": "Qwen/Qwen3-8B"}).base == WeightsSpec(
        kind="path", name="Qwen/Qwen3-8B")
    assert [is_built_in(name) for name in ("tiny", "tiny-wide:qwen3", "smollm2-135m", "tiny2", "./tiny")] == [
        True, True, True, False, False]
    assert ModelSpec.parse("hf:tiny-qwen3.5+runs/a").weights == WeightsSpec(kind="tiny", name="tiny-qwen3.5")
