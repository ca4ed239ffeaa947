"""The HTTP backends against a local server that speaks each wire format from a scripted queue."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from unscaffold.errors import AuthError, ContextLengthError, ModelError, RetryableModelError
from unscaffold.llm.anthropic_backend import AnthropicModel
from unscaffold.llm.openai_backend import OpenAIModel
from unscaffold.llm.retry import Backoff
from unscaffold.llm.sampling import Sampling
from unscaffold.llm.types import AssistantResponse, ChatToolCall, FunctionCall, Message, ToolCall, Usage

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "execute",
            "description": "Run a bash command.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        },
    }
]
BAD_ARGS = '{"command": "ls'
PWD = FunctionCall(name="execute", arguments={"command": "pwd"})


class FakeServer:
    """Answers each POST with the next scripted (status, body, delay_s) and records what it was sent."""

    def __init__(self) -> None:
        self.script: list[tuple[int, dict[str, Any], float]] = []
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server naming)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                headers = {k.lower(): v for k, v in self.headers.items()}
                with owner.lock:
                    owner.requests.append({"path": self.path, "headers": headers, "body": body})
                    status, answer, delay = owner.script.pop(0) if owner.script else (599, {}, 0.0)
                if delay:
                    time.sleep(delay)
                data = json.dumps(answer).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up (timeout test)
                    pass

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.01,), daemon=True)

    def push(self, status: int, body: dict[str, Any], delay_s: float = 0.0) -> None:
        self.script.append((status, body, delay_s))


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL", "ANTHROPIC_CUSTOM_HEADERS", "ANTHROPIC_PROFILE",
        "UNSCAFFOLD_ANTHROPIC_THINKING",
        "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")


@pytest.fixture
def server() -> Iterator[FakeServer]:
    s = FakeServer()
    s.thread.start()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


def quick(attempts: int) -> Backoff:
    return Backoff(attempts=attempts, initial_s=0.001, max_s=0.001)


def openai_model(server: FakeServer, *, attempts: int = 3, **kwargs: Any) -> OpenAIModel:
    kwargs.setdefault("api_key", "test-key")
    return OpenAIModel(
        "openai:test-model", "test-model", base_url=server.url + "/v1", backoff=quick(attempts), **kwargs,
    )


def anthropic_model(server: FakeServer, *, attempts: int = 3, **kwargs: Any) -> AnthropicModel:
    kwargs.setdefault("api_key", "test-key")
    return AnthropicModel(
        "anthropic:claude-test", "claude-test", base_url=server.url, backoff=quick(attempts), **kwargs,
    )


def user(text: str = "List files.") -> list[Message]:
    return [Message(role="system", content="You are terse."), Message(role="user", content=text)]


# --- OpenAI wire format -------------------------------------------------------------------------


def openai_ok(arguments: str = '{"command": "ls -la"}', reasoning_key: str = "reasoning_content") -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "test-model",
        "choices": [{
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": "Listing files.",
                reasoning_key: "I should list files.",
                "tool_calls": [{
                    "id": "call_1", "type": "function",
                    "function": {"name": "execute", "arguments": arguments},
                }],
            },
        }],
        "usage": {"prompt_tokens": 120, "completion_tokens": 34, "total_tokens": 154},
    }


def openai_error(message: str, type_: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


@pytest.mark.parametrize("reasoning_key", ["reasoning_content", "reasoning"])
def test_openai_rate_limit_then_success(server: FakeServer, reasoning_key: str) -> None:
    server.push(429, openai_error("Rate limit reached", "rate_limit_error", "rate_limit_exceeded"))
    server.push(200, openai_ok(reasoning_key=reasoning_key))
    response = openai_model(server).complete(user(), TOOLS)
    assert len(server.requests) == 2
    assert [r["path"] for r in server.requests] == ["/v1/chat/completions"] * 2
    assert response == AssistantResponse(
        reasoning="I should list files.",
        content="Listing files.",
        tool_calls=[ToolCall(id="call_1", name="execute", arguments={"command": "ls -la"})],
        usage=Usage(input_tokens=120, output_tokens=34),
    )


def test_openai_malformed_arguments_kept_raw(server: FakeServer) -> None:
    server.push(200, openai_ok(arguments=BAD_ARGS))
    response = openai_model(server).complete(user(), TOOLS)
    expected = ToolCall(id="call_1", name="execute", arguments=None, raw_arguments=BAD_ARGS)
    assert response.tool_calls == [expected]


@pytest.mark.parametrize(
    "body",
    [
        openai_error(
            "This model's maximum context length is 32768 tokens. "
            "However, your messages resulted in 40000 tokens.",
            "invalid_request_error", "context_length_exceeded",
        ),
        # vLLM: the same wording, an integer code and no "error" wrapper.
        {"object": "error", "message": "This model's maximum context length is 4096 tokens. However, you "
         "requested 5000 tokens.", "type": "BadRequestError", "param": None, "code": 400},
    ],
)
def test_openai_context_length_not_retried(server: FakeServer, body: dict[str, Any]) -> None:
    server.push(400, body)
    with pytest.raises(ContextLengthError, match="HTTP 400"):
        openai_model(server).complete(user(), TOOLS)
    assert len(server.requests) == 1


def test_openai_other_bad_request_is_plain_model_error(server: FakeServer) -> None:
    server.push(400, openai_error("Unknown parameter: 'foo'.", "invalid_request_error", "unknown_parameter"))
    with pytest.raises(ModelError) as info:
        openai_model(server).complete(user(), TOOLS)
    assert type(info.value) is ModelError
    assert len(server.requests) == 1


def test_openai_timeout_is_retryable(server: FakeServer) -> None:
    server.push(200, openai_ok(), delay_s=0.6)
    server.push(200, openai_ok(), delay_s=0.6)
    with pytest.raises(RetryableModelError, match="APITimeoutError"):
        openai_model(server, attempts=2, timeout_s=0.1).complete(user(), TOOLS)
    assert len(server.requests) == 2


def test_openai_connection_refused_is_retryable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    model = OpenAIModel("openai:m", "m", base_url=f"http://127.0.0.1:{port}/v1", backoff=quick(2))
    with pytest.raises(RetryableModelError, match="APIConnectionError"):
        model.complete(user(), TOOLS)


def test_openai_request_body(server: FakeServer) -> None:
    server.push(200, openai_ok())
    messages = [
        *user(),
        Message(
            role="assistant",
            content="",
            reasoning_content="Earlier thinking, sent back.",
            tool_calls=[
                ChatToolCall(id="call_0", function=PWD),
                ChatToolCall(id="call_1", function=FunctionCall(name="execute", arguments=BAD_ARGS)),
            ],
        ),
        Message(role="tool", content="/work", tool_call_id="call_0"),
        Message(role="tool", content="error: arguments are not valid JSON", tool_call_id="call_1"),
    ]
    openai_model(server, api_key=None, sampling=Sampling(temperature=0.5, max_tokens=512)).complete(messages, TOOLS)
    (request,) = server.requests
    assert request["headers"]["authorization"] == "Bearer EMPTY"  # no key needed for a self-hosted server
    body = request["body"]
    assert body["model"] == "test-model"
    assert body["tools"] == TOOLS
    assert body["temperature"] == 0.5
    assert body["max_tokens"] == 512
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "List files."},
        {
            "role": "assistant",
            "content": "",
            "reasoning": "Earlier thinking, sent back.",  # what vLLM hands the chat template
            "reasoning_content": "Earlier thinking, sent back.",  # and SGLang
            "tool_calls": [
                {"id": "call_0", "type": "function",
                 "function": {"name": "execute", "arguments": '{"command": "pwd"}'}},
                {"id": "call_1", "type": "function", "function": {"name": "execute", "arguments": BAD_ARGS}},
            ],
        },
        {"role": "tool", "content": "/work", "tool_call_id": "call_0"},
        {"role": "tool", "content": "error: arguments are not valid JSON", "tool_call_id": "call_1"},
    ]


def test_openai_own_api_gets_no_reasoning_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    turn = Message(role="assistant", content="Done.", reasoning_content="Thought.")
    assert OpenAIModel("openai:gpt-test", "gpt-test", api_key="k").wire_messages([turn]) == [
        {"role": "assistant", "content": "Done."}]
    served = OpenAIModel("openai:q", "q", api_key="k", base_url="http://127.0.0.1:1/v1")
    assert served.wire_messages([turn]) == [{"role": "assistant", "content": "Done.", "reasoning": "Thought.",
                                             "reasoning_content": "Thought."}]
    assert OpenAIModel("openai:q", "q", api_key="k", send_reasoning=True).wire_messages([turn]) == \
        served.wire_messages([turn])
    for kind, field in (("vllm", "reasoning"), ("sglang", "reasoning_content")):
        known = OpenAIModel("openai:q", "q", api_key="k", base_url="http://127.0.0.1:1/v1", server=kind)
        assert known.wire_messages([turn]) == [{"role": "assistant", "content": "Done.", field: "Thought."}]


def test_the_server_kind_is_an_option_of_the_spec() -> None:
    from unscaffold.errors import InputError
    from unscaffold.specs import ModelSpec

    spec = ModelSpec.parse("openai:qwen@http://127.0.0.1:8000/v1?server=vllm")
    assert (spec.target, spec.base_url, spec.server) == ("qwen", "http://127.0.0.1:8000/v1", "vllm")
    assert ModelSpec.parse("openai:qwen@http://127.0.0.1:8000/v1").server is None
    with pytest.raises(InputError) as err:
        ModelSpec.parse("openai:qwen@http://h/v1?server=tgi")
    assert str(err.value) == "--student: openai server 'tgi' is not one of vllm, sglang"


def test_openai_needs_a_key_without_a_server() -> None:
    with pytest.raises(AuthError, match="OPENAI_API_KEY"):
        OpenAIModel("openai:gpt-test", "gpt-test")


# --- Anthropic wire format ----------------------------------------------------------------------


def anthropic_ok(tool_input: Any = None) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [
            {"type": "thinking", "thinking": "I should list files.", "signature": "sig-abc"},
            {"type": "text", "text": "Listing files."},
            {"type": "tool_use", "id": "toolu_1", "name": "execute",
             "input": {"command": "ls -la"} if tool_input is None else tool_input},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 120, "output_tokens": 34},
    }


def anthropic_error(type_: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": type_, "message": message}}


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (429, anthropic_error("rate_limit_error", "Number of request tokens has exceeded your rate limit.")),
        (529, anthropic_error("overloaded_error", "Overloaded")),
    ],
)
def test_anthropic_transient_error_then_success(server: FakeServer, status: int, body: dict[str, Any]) -> None:
    server.push(status, body)
    server.push(200, anthropic_ok())
    response = anthropic_model(server).complete(user(), TOOLS)
    assert len(server.requests) == 2
    assert [r["path"] for r in server.requests] == ["/v1/messages"] * 2
    headers = server.requests[0]["headers"]  # SDK versions differ: x-api-key or a bearer token
    assert "test-key" in (headers.get("x-api-key"), headers.get("authorization", "").removeprefix("Bearer "))
    assert response == AssistantResponse(
        reasoning="I should list files.",
        content="Listing files.",
        tool_calls=[ToolCall(id="toolu_1", name="execute", arguments={"command": "ls -la"})],
        usage=Usage(input_tokens=120, output_tokens=34),
        provider_data={"thinking_signature": "sig-abc"},
    )


def test_anthropic_malformed_input_kept_raw(server: FakeServer) -> None:
    server.push(200, anthropic_ok(tool_input=BAD_ARGS))
    response = anthropic_model(server).complete(user(), TOOLS)
    expected = ToolCall(id="toolu_1", name="execute", arguments=None, raw_arguments=BAD_ARGS)
    assert response.tool_calls == [expected]


def test_anthropic_context_length_not_retried(server: FakeServer) -> None:
    message = "prompt is too long: 210000 tokens > 200000 maximum"
    server.push(400, anthropic_error("invalid_request_error", message))
    with pytest.raises(ContextLengthError, match=message):
        anthropic_model(server).complete(user(), TOOLS)
    assert len(server.requests) == 1


# Each backend with its API's own error bodies: (model, auth failure by status, server failure, success).
BACKENDS = {
    "openai": (openai_model, lambda status: openai_error("Incorrect API key", "invalid_request_error",
                                                         "invalid_api_key"),
               lambda: openai_error("The server had an error", "server_error"), openai_ok),
    "anthropic": (anthropic_model, lambda status: anthropic_error({401: "authentication_error",
                                                                   403: "permission_error"}[status],
                                                                  "invalid x-api-key"),
                  lambda: anthropic_error("api_error", "Internal server error"), anthropic_ok),
}


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize("status", [401, 403])
def test_an_auth_error_is_not_retried(server: FakeServer, backend: str, status: int) -> None:
    model, auth_error, _, _ = BACKENDS[backend]
    server.push(status, auth_error(status))
    with pytest.raises(AuthError, match=f"HTTP {status}"):
        model(server).complete(user(), TOOLS)
    assert len(server.requests) == 1


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_a_server_error_is_retried_until_attempts_run_out(server: FakeServer, backend: str) -> None:
    model, _, server_error, ok = BACKENDS[backend]
    for _ in range(3):
        server.push(500, server_error())
    server.push(200, ok())  # never reached
    with pytest.raises(RetryableModelError, match="HTTP 500"):
        model(server, attempts=3).complete(user(), TOOLS)
    assert len(server.requests) == 3


def test_anthropic_request_body_passes_thinking_back(server: FakeServer) -> None:
    server.push(200, anthropic_ok())
    server.push(200, anthropic_ok())
    model = anthropic_model(server)
    first = model.complete(user(), TOOLS)
    parallel = first.to_message().model_copy(update={"tool_calls": [
        ChatToolCall(id="toolu_1", function=FunctionCall(name="execute", arguments={"command": "ls -la"})),
        ChatToolCall(id="toolu_2", function=FunctionCall(name="execute", arguments={"command": "pwd"})),
    ]})
    transcript = [
        *user(),
        parallel,
        Message(role="tool", content="total 0", tool_call_id="toolu_1"),
        Message(role="tool", content="/work", tool_call_id="toolu_2"),
    ]
    model.complete(transcript, TOOLS)

    first_body = server.requests[0]["body"]
    assert first_body["system"] == "You are terse."
    assert first_body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "List files."}]}]
    assert first_body["max_tokens"] == 8192
    assert "thinking" not in first_body and "temperature" not in first_body
    assert first_body["tools"] == [{
        "name": "execute",
        "description": "Run a bash command.",
        "input_schema": TOOLS[0]["function"]["parameters"],
    }]

    body = server.requests[1]["body"]
    assert body["system"] == "You are terse."
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "List files."}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "I should list files.", "signature": "sig-abc"},
            {"type": "text", "text": "Listing files."},
            {"type": "tool_use", "id": "toolu_1", "name": "execute", "input": {"command": "ls -la"}},
            {"type": "tool_use", "id": "toolu_2", "name": "execute", "input": {"command": "pwd"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "total 0"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "/work"},
        ]},
    ]


def test_anthropic_no_thinking_block_without_signature(server: FakeServer) -> None:
    server.push(200, anthropic_ok())
    earlier = Message(role="assistant", content="Done.", reasoning_content="From another model.")
    transcript = [*user(), earlier]
    anthropic_model(server).complete([*transcript, Message(role="user", content="Again.")], TOOLS)
    assert server.requests[0]["body"]["messages"][1:] == [
        {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
        {"role": "user", "content": [{"type": "text", "text": "Again."}]},
    ]


def test_anthropic_thinking_budget(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    server.push(200, anthropic_ok())
    server.push(200, anthropic_ok())
    anthropic_model(server, thinking_budget=2048, sampling=Sampling(temperature=0.3)).complete(user(), TOOLS)
    monkeypatch.setenv("UNSCAFFOLD_ANTHROPIC_THINKING", "16000")
    anthropic_model(server).complete(user(), TOOLS)
    first, second = (r["body"] for r in server.requests)
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert first["max_tokens"] == 8192
    assert "temperature" not in first
    assert second["thinking"] == {"type": "enabled", "budget_tokens": 16000}
    assert second["max_tokens"] == 16000 + 4096


def test_anthropic_keeps_signed_thinking_and_goes_without_it_after_an_unsigned_turn(server: FakeServer) -> None:
    def loop(provider_data: dict[str, Any] | None) -> list[Message]:
        call = ChatToolCall(id="toolu_1", function=PWD)
        turn = Message(role="assistant", reasoning_content="Where am I?", tool_calls=[call],
                       provider_data=provider_data)
        return [*user(), turn, Message(role="tool", content="/work", tool_call_id="toolu_1")]

    server.push(200, anthropic_ok())
    server.push(200, anthropic_ok())
    anthropic_model(server, thinking_budget=2048).complete(loop({"thinking_signature": "sig-1"}), TOOLS)
    anthropic_model(server, thinking_budget=2048).complete(loop(None), TOOLS)  # e.g. a reviewer's replacement
    signed, unsigned = (r["body"] for r in server.requests)
    assert signed["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert signed["messages"][1]["content"][0] == {"type": "thinking", "thinking": "Where am I?", "signature": "sig-1"}
    assert "thinking" not in unsigned and "temperature" not in unsigned
    assert unsigned["messages"][1]["content"] == [
        {"type": "tool_use", "id": "toolu_1", "name": "execute", "input": {"command": "pwd"}}]
