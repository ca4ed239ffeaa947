"""Sampling settings: a spec's query and `run`'s options reach the model (the request body an
OpenAI-compatible server receives, the generation of an `hf:` model) and are part of the run's identity."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fixtures_tiny import tiny_model_dir  # noqa: F401 (pytest fixture)
from typer.testing import CliRunner

from tests.test_llm_http_backends import FakeServer, anthropic_ok, clean_env, server  # noqa: F401 (pytest fixtures)
from unscaffold.cli import app
from unscaffold.errors import InputError
from unscaffold.llm.registry import load_provider
from unscaffold.llm.sampling import Sampling
from unscaffold.specs import ModelSpec


def final_answer() -> dict[str, Any]:
    message = {"role": "assistant", "content": "Done."}
    return {"id": "c", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}


def test_every_model_spec_takes_the_sampling_query() -> None:
    spec = ModelSpec.parse("openai:Qwen/Qwen3-8B@http://localhost:8000/v1?temperature=0.7&top_p=0.95&max_tokens=1024&seed=1")
    assert (spec.target, spec.base_url) == ("Qwen/Qwen3-8B", "http://localhost:8000/v1")
    assert spec.sampling == Sampling(temperature=0.7, top_p=0.95, max_tokens=1024, seed=1)
    assert ModelSpec.parse("anthropic:claude-sonnet-4-5?temperature=0.2&max_tokens=900").sampling == Sampling(
        temperature=0.2, max_tokens=900)
    hf = ModelSpec.parse("hf:tiny+runs/a?max_new_tokens=320&temperature=0.8&seed=4")
    assert (hf.target, hf.adapter, hf.max_new_tokens) == ("tiny", "runs/a", 320)
    assert hf.sampling == Sampling(temperature=0.8, max_tokens=320, seed=4)
    assert ModelSpec.parse("openai:gpt-5").sampling == Sampling()


@pytest.mark.parametrize(("spec", "message"), [
    ("openai:m?temprature=1", "--student: unknown openai option 'temprature'; expected temperature=, top_p=, "
                              "max_tokens=, seed=, server="),
    ("hf:tiny?server=vllm", "--student: unknown hf option 'server'; expected temperature=, top_p=, max_tokens=, "
                            "seed="),
    ("openai:m?server=ollama", "--student: openai server 'ollama' is not one of vllm, sglang"),
    ("hf:tiny?top_p=1.5", "--student: hf top_p '1.5': Input should be less than or equal to 1"),
    ("hf:tiny?max_new_tokens=0", "--student: hf max_tokens '0': Input should be greater than or equal to 1"),
    ("openai:m?temperature=hot", "--student: openai temperature 'hot': Input should be a valid number, unable to "
                                 "parse string as a number"),
])
def test_a_bad_sampling_query_is_one_line(spec: str, message: str) -> None:
    with pytest.raises(InputError) as e:
        ModelSpec.parse(spec)
    assert str(e.value) == message


def test_options_add_to_the_spec_and_a_setting_given_twice_is_refused() -> None:
    model: Any = load_provider("hf:tiny?max_new_tokens=7", sampling=Sampling(temperature=0.9, seed=5)).for_trial("t")
    assert (model.max_new_tokens, model.temperature, model.top_p, model.seed) == (7, 0.9, None, 5)
    with pytest.raises(InputError) as e:
        load_provider("hf:tiny?temperature=0.5", sampling=Sampling(temperature=0.9))
    assert str(e.value) == "--student: temperature is 0.5 in the spec and 0.9 as an option; give it once"
    with pytest.raises(InputError) as e:
        load_provider("replay:x.json", sampling=Sampling(temperature=0.9))
    assert str(e.value) == ("--student: replay:x.json: a replay plays recorded responses; sampling settings "
                            "(temperature) do not apply")


def test_run_sends_the_sampling_settings_to_an_openai_compatible_server(server: FakeServer,  # noqa: F811
                                                                        tmp_path: Path) -> None:
    """`run --temperature --top-p --max-tokens --sampling-seed` reach the request body, with a spec's own query,
    are recorded in config.json and make the run's identity (a resume with another temperature is refused)."""
    server.push(200, final_answer())
    out = tmp_path / "run"
    student = f"openai:test-model@{server.url}/v1?top_p=0.9"
    argv = ["run", "retrosynthesis", "--student", student, "--tasks", "rxn-001", "--max-turns", "2",
            "--sandbox", "none", "--no-preflight", "--out", str(out), "--max-tokens", "64", "--sampling-seed", "3"]
    result = CliRunner().invoke(app, [*argv, "--temperature", "0.7"])
    assert result.exit_code in (0, 1), result.output  # the answer is wrong: the trial fails, the run is fine
    (request,) = server.requests
    body = request["body"]
    assert {k: body[k] for k in ("model", "temperature", "top_p", "max_tokens", "seed")} == {
        "model": "test-model", "temperature": 0.7, "top_p": 0.9, "max_tokens": 64, "seed": 3}
    config = json.loads((out / "config.json").read_text())
    assert config["sampling"] == {"temperature": 0.7, "top_p": None, "max_tokens": 64, "seed": 3}
    again = CliRunner().invoke(app, [*argv, "--temperature", "0.2"])
    assert again.exit_code == 2
    assert again.output.endswith(f"error: {out / 'config.json'}: sampling: the run in {out} was started with other "
                            "settings (sampling); use another --out\n")
    assert len(server.requests) == 1


def test_an_anthropic_spec_sends_what_the_installed_sdk_takes(server: FakeServer,  # noqa: F811
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Recent anthropic SDKs take no temperature, top_p or seed: a spec asking for one is refused in one line
    (never a TypeError mid-run); max_tokens always reaches the request."""
    from importlib.metadata import version

    from unscaffold.llm.anthropic_backend import sdk_sampling
    from unscaffold.llm.types import Message

    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    server.push(200, anthropic_ok())
    load_provider("anthropic:claude-test?max_tokens=700", flag="--reviewer").for_trial("t").complete(
        [Message(role="user", content="hi")], [])
    assert server.requests[0]["body"]["max_tokens"] == 700
    refused = sorted({"temperature", "top_p", "seed"} - sdk_sampling())
    if not refused:
        pytest.skip("this anthropic SDK takes every sampling setting")
    with pytest.raises(InputError) as e:
        load_provider("anthropic:claude-test?temperature=0.3&top_p=0.9&seed=1", flag="--reviewer")
    assert str(e.value) == (f"--reviewer: anthropic:claude-test?temperature=0.3&top_p=0.9&seed=1: the installed "
                            f"anthropic SDK ({version('anthropic')}) sends no {', '.join(refused)}; leave "
                            f"{'them' if len(refused) > 1 else 'it'} out")


def test_oracle_takes_no_sampling_settings(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["run", "retrosynthesis", "--student", "oracle", "--tasks", "rxn-001",
                                      "--sandbox", "none", "--temperature", "0.5", "--out", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert result.output.endswith("error: --student: oracle runs reference solutions; sampling settings "
                                  "(temperature) do not apply\n")


def test_a_sampled_hf_turn_repeats_with_its_seed_and_a_second_draw_differs(tiny_model_dir: Path) -> None:  # noqa: F811
    from unscaffold.llm.hf_backend import HFModel
    from unscaffold.llm.types import Message

    def turn(seed: int | None, model: HFModel | None = None) -> tuple[str, HFModel]:
        model = model or HFModel("hf:tiny", str(tiny_model_dir),
                                 sampling=Sampling(temperature=1.0, max_tokens=24, seed=seed))
        response = model.complete([Message(role="user", content="hi")], [])
        return f"{response.reasoning}|{response.content}|{response.tool_calls}", model

    first, model = turn(11)
    assert turn(11)[0] == first  # a fresh model with the same seed draws the same turn
    assert turn(11, model)[0] != first  # the same prompt drawn again (a second trial) gets its own seed
