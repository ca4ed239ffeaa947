"""Qwen completion parsing, the tiny offline checkpoint, and the local HF backend on it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fixtures_tiny import tiny_model_dir, tiny_qwen3_dir  # noqa: F401  (pytest fixtures)

from unscaffold.errors import ContextLengthError, ModelError
from unscaffold.llm.hf_backend import HFModel
from unscaffold.llm.qwen_parse import parse_completion
from unscaffold.llm.types import AssistantResponse, ChatToolCall, FunctionCall, Message, ToolCall
from unscaffold.minimal_harness.tool import EXECUTE_TOOL, format_problem
from unscaffold.offline.tiny import build_tiny_model, read_trl_template

TOOLS = [EXECUTE_TOOL]
TYPED_TOOL = {
    "type": "function",
    "function": {
        "name": "edit",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "line": {"type": "integer"},
                "opts": {"type": "object"},
                "force": {"type": "boolean"},
            },
        },
    },
}


def execute(command: str, i: int = 0) -> ToolCall:
    return ToolCall(id=f"call_{i}", name="execute", arguments={"command": command})


# --- parsing -------------------------------------------------------------------------------------


def test_parse_qwen3_json_call_with_think() -> None:
    text = (
        "<think>\nI will list files.\n</think>\n\n"
        '<tool_call>\n{"name": "execute", "arguments": {"command": "ls -la"}}\n</tool_call><|im_end|>'
    )
    assert parse_completion(text) == AssistantResponse(
        reasoning="I will list files.", content=None, tool_calls=[execute("ls -la")]
    )


def test_parse_qwen3_json_arguments_as_string() -> None:
    text = '<tool_call>\n{"name": "execute", "arguments": "{\\"command\\": \\"pwd\\"}"}\n</tool_call>'
    assert parse_completion(text).tool_calls == [execute("pwd")]


def test_parse_qwen3_5_xml_call_multiline_value() -> None:
    text = (
        "Let me write the script.\n\n<tool_call>\n<function=execute>\n<parameter=command>\n"
        "cat <<'EOF' > a.py\nprint(1)\n\nEOF\npython3 a.py\n</parameter>\n</function>\n</tool_call>"
    )
    assert parse_completion(text) == AssistantResponse(
        content="Let me write the script.",
        tool_calls=[execute("cat <<'EOF' > a.py\nprint(1)\n\nEOF\npython3 a.py")],
    )


def test_parse_xml_strips_exactly_one_newline_each_side() -> None:
    text = (
        "<tool_call>\n<function=execute>\n<parameter=command>\n\n  echo hi\n\n</parameter>\n</function>\n"
        "</tool_call>"
    )
    assert parse_completion(text).tool_calls == [execute("\n  echo hi\n")]


def test_parse_xml_several_parameters_untyped_and_typed() -> None:
    text = (
        "<tool_call>\n<function=edit>\n<parameter=path>\n/tmp/x\n</parameter>\n<parameter=line>\n42\n</parameter>\n"
        '<parameter=opts>\n{"a": [1, 2]}\n</parameter>\n<parameter=force>\nTrue\n</parameter>\n</function>\n'
        "</tool_call>"
    )
    untyped = parse_completion(text).tool_calls[0]
    assert untyped.arguments == {"path": "/tmp/x", "line": "42", "opts": '{"a": [1, 2]}', "force": "True"}
    typed = parse_completion(text, tools=[TYPED_TOOL]).tool_calls[0]
    assert typed == ToolCall(
        id="call_0",
        name="edit",
        arguments={"path": "/tmp/x", "line": 42, "opts": {"a": [1, 2]}, "force": True},
    )


def test_parse_string_parameter_that_looks_like_json_stays_a_string() -> None:
    text = (
        "<tool_call>\n<function=execute>\n<parameter=command>\ntrue\n</parameter>\n</function>\n</tool_call>"
    )
    assert parse_completion(text, tools=TOOLS).tool_calls == [execute("true")]


def test_parse_think_without_opening_tag() -> None:
    """The Qwen3.5 generation prompt already opened <think>, so the text starts inside it."""
    text = "The user wants 2+2.\n</think>\n\nThe answer is 4.<|im_end|>"
    assert parse_completion(text, in_think=True) == AssistantResponse(
        reasoning="The user wants 2+2.", content="The answer is 4."
    )
    assert parse_completion(text) == parse_completion(text, in_think=True)


def test_parse_think_never_closed() -> None:
    text = "Still thinking about the spread"
    assert parse_completion(text, in_think=True) == AssistantResponse(reasoning=text)
    assert parse_completion(text) == AssistantResponse(content=text)
    opened = "<think>\nhmm\n<tool_call>\n<function=execute>\n<parameter=command>\nls\n</parameter>"
    assert parse_completion(opened) == AssistantResponse(reasoning="hmm", tool_calls=[execute("ls")])


def test_parse_two_calls() -> None:
    text = (
        "</think>\n\nTwo at once.\n\n<tool_call>\n<function=execute>\n<parameter=command>\nls\n</parameter>\n"
        "</function>\n</tool_call>\n<tool_call>\n<function=execute>\n<parameter=command>\npwd\n</parameter>\n"
        "</function>\n</tool_call><|im_end|>"
    )
    response = parse_completion(text, in_think=True)
    calls = [execute("ls", 0), execute("pwd", 1)]
    assert response == AssistantResponse(content="Two at once.", tool_calls=calls)
    assert format_problem(response) == "Format error: make exactly one tool call per reply (got 2)."


def test_parse_malformed_json() -> None:
    text = '<tool_call>\n{"name": "execute", "arguments": {"command": "ls"\n</tool_call>'
    response = parse_completion(text)
    assert response.tool_calls == [
        ToolCall(
            id="call_0",
            name="execute",
            arguments=None,
            raw_arguments='{"name": "execute", "arguments": {"command": "ls"',
        )
    ]
    assert response.content is None
    assert format_problem(response) == "Format error: the tool arguments are not a JSON object."


def test_parse_garbage_in_tool_call() -> None:
    response = parse_completion("<tool_call>\nrun ls please\n</tool_call>")
    assert response.tool_calls == [
        ToolCall(id="call_0", name="", arguments=None, raw_arguments="run ls please")
    ]


def test_parse_missing_closing_tags() -> None:
    xml = "<tool_call>\n<function=execute>\n<parameter=command>\npwd\n<|im_end|>"
    assert parse_completion(xml) == AssistantResponse(tool_calls=[execute("pwd")])
    js = '<tool_call>\n{"name": "execute", "arguments": {"command": "pwd"}}<|im_end|>'
    assert parse_completion(js) == AssistantResponse(tool_calls=[execute("pwd")])
    unclosed_then_next = (
        "<tool_call>\n<function=execute>\n<parameter=command>\nls\n</parameter>\n"
        "<tool_call>\n<function=execute>\n<parameter=command>\npwd\n</parameter>\n</function>\n</tool_call>"
    )
    assert parse_completion(unclosed_then_next).tool_calls == [execute("ls", 0), execute("pwd", 1)]


def test_parse_bare_function_block() -> None:
    text = "<function=execute>\n<parameter=command>\nls\n</parameter>\n</function>"
    assert parse_completion(text) == AssistantResponse(tool_calls=[execute("ls")])


def test_parse_plain_final_answer() -> None:
    assert parse_completion("The result is 42.\n<|im_end|>\n<|endoftext|>") == AssistantResponse(
        content="The result is 42."
    )
    assert parse_completion("<|im_end|>") == AssistantResponse()


# --- the tiny checkpoint and its templates ------------------------------------------------------


def conversation(reasoning: str = "I should look around.") -> list[Message]:
    call = ChatToolCall(id="call_0", function=FunctionCall(name="execute", arguments={"command": "ls -la"}))
    return [
        Message(role="system", content="You are terse."),
        Message(role="user", content="What is here?"),
        Message(role="assistant", content="", reasoning_content=reasoning, tool_calls=[call]),
        Message(role="tool", tool_call_id="call_0", name="execute", content="a.txt\n[exit_code=0]"),
    ]


def test_tiny_model_builds_with_the_real_template(tiny_model_dir: Path) -> None:  # noqa: F811
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert tok.chat_template == read_trl_template("qwen3_5_think")
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    for tag in ("<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"):
        assert len(tok(tag, add_special_tokens=False)["input_ids"]) == 1, tag
    text = tok.apply_chat_template(
        [m.chat_dict() for m in conversation()], tools=TOOLS, add_generation_prompt=True, tokenize=False
    )
    call = "<tool_call>\n<function=execute>\n<parameter=command>\nls -la\n</parameter>\n</function>\n"
    assert call + "</tool_call>" in text
    assert "<|im_start|>assistant\n<think>\nI should look around.\n</think>\n\n<tool_call>" in text
    assert "<|im_start|>user\n<tool_response>\na.txt\n[exit_code=0]\n</tool_response><|im_end|>\n" in text
    assert text.endswith("<|im_start|>assistant\n<think>\n")
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids, skip_special_tokens=False) == text


def test_tiny_model_is_idempotent(tiny_model_dir: Path) -> None:  # noqa: F811
    weights = tiny_model_dir / "model.safetensors"
    before = weights.stat().st_mtime_ns
    assert build_tiny_model(tiny_model_dir) == tiny_model_dir
    assert weights.stat().st_mtime_ns == before


def test_qwen3_5_template_drops_reasoning_before_the_last_user_turn(tiny_model_dir: Path) -> None:  # noqa: F811
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    rows = [m.chat_dict() for m in conversation("SECRET")] + [{"role": "user", "content": "And now?"}]
    text = tok.apply_chat_template(rows, tools=TOOLS, add_generation_prompt=True, tokenize=False)
    assert "SECRET" not in text and "<|im_start|>assistant\n<tool_call>\n<function=execute>" in text


@pytest.mark.parametrize("which", ["qwen3_5_think", "qwen3"])
def test_rendered_assistant_turn_parses_back(
    which: str,
    tiny_model_dir: Path,  # noqa: F811
    tiny_qwen3_dir: Path,  # noqa: F811
) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir if which == "qwen3_5_think" else tiny_qwen3_dir)
    rows = [m.chat_dict() for m in conversation()[:3]]
    text = tok.apply_chat_template(rows, tools=TOOLS, tokenize=False)
    turn = text.rsplit("<|im_start|>assistant\n", 1)[1]
    assert parse_completion(turn, tools=TOOLS) == AssistantResponse(
        reasoning="I should look around.", tool_calls=[execute("ls -la")]
    )


# --- the HF backend on the tiny checkpoint ------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_hf(tiny_model_dir: Path) -> Iterator[HFModel]:  # noqa: F811
    yield HFModel(f"hf:{tiny_model_dir}", str(tiny_model_dir), max_new_tokens=8, device="cpu")


def test_complete_smoke(tiny_hf: HFModel) -> None:
    messages = conversation()
    response = tiny_hf.complete(messages, TOOLS)
    assert isinstance(response, AssistantResponse)
    prompt = tiny_hf.render_prompt(messages, TOOLS)
    assert prompt.endswith("<|im_start|>assistant\n<think>\n")
    n_prompt = len(tiny_hf.tokenizer(prompt, add_special_tokens=False)["input_ids"])
    assert response.usage.input_tokens == n_prompt
    assert 1 <= response.usage.output_tokens <= 8
    assert tiny_hf.complete(messages, TOOLS) == response  # greedy is deterministic


def test_complete_renders_a_malformed_call_kept_as_text(tiny_hf: HFModel) -> None:
    bad = ChatToolCall(id="call_0", function=FunctionCall(name="execute", arguments='{"command": "ls'))
    messages = conversation()
    messages[2] = messages[2].model_copy(update={"tool_calls": [bad]})
    prompt = tiny_hf.render_prompt(messages, TOOLS)
    assert "<tool_call>\n<function=execute>\n</function>\n</tool_call>" in prompt
    assert 1 <= tiny_hf.complete(messages, TOOLS).usage.output_tokens <= 8


def test_context_length_error(tiny_hf: HFModel) -> None:
    assert tiny_hf.context_length is not None
    long = [Message(role="user", content="ls -la " * (tiny_hf.context_length // 2))]
    with pytest.raises(ContextLengthError):
        tiny_hf.complete(long, TOOLS)


def test_unloadable_path_is_a_model_error(tmp_path: Path) -> None:
    model = HFModel("hf:nowhere", str(tmp_path / "nowhere"), device="cpu")
    with pytest.raises(ModelError):
        model.complete([Message(role="user", content="hi")], TOOLS)


def test_peft_adapter_loads(tiny_model_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    config = LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False)
    get_peft_model(base, config).save_pretrained(tmp_path / "adapter")
    adapter = str(tmp_path / "adapter")
    model = HFModel("hf:tiny+adapter", str(tiny_model_dir), adapter=adapter, max_new_tokens=8)
    response = model.complete([Message(role="user", content="hi")], TOOLS)
    assert isinstance(model._model, PeftModel)
    loaded: Any = model._model
    assert any("lora_A" in name for name, _ in loaded.named_parameters())
    assert 1 <= response.usage.output_tokens <= 8


def test_hf_spec_bounds_new_tokens_per_turn() -> None:
    """`?max_new_tokens=N` caps each turn, so a small model that never learnt to stop cannot run 2,048 tokens."""
    from unscaffold.errors import InputError
    from unscaffold.llm.registry import load_provider
    from unscaffold.specs import ModelSpec

    spec = ModelSpec.parse("hf:tiny-wide+runs/demo/adapter?max_new_tokens=320")
    assert (spec.target, spec.adapter, spec.max_new_tokens) == ("tiny-wide", "runs/demo/adapter", 320)
    assert ModelSpec.parse("hf:tiny+runs/a").max_new_tokens is None
    model: Any = load_provider("hf:tiny?max_new_tokens=7").for_trial("t")
    assert (model.path, model.max_new_tokens) == ("tiny", 7)
    assert ModelSpec.parse("hf:tiny?max_tokens=7").max_new_tokens == 7  # the name every spec takes
    with pytest.raises(InputError, match=r"--student: unknown hf option 'max_new_token'; expected temperature="):
        ModelSpec.parse("hf:tiny?max_new_token=7")
    sampled: Any = load_provider("hf:tiny?max_new_tokens=7&temperature=1").for_trial("t")
    assert (sampled.max_new_tokens, sampled.temperature) == (7, 1.0)  # sampled trials, for Pass@k
    with pytest.raises(InputError, match=r"hf max_tokens '0': Input should be greater than or equal to 1"):
        ModelSpec.parse("hf:tiny?max_new_tokens=0")
