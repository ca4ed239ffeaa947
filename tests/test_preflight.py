"""Every resource a command needs is checked before the first trial: one line per missing one, exit 2."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.helpers import HARBOR_EXAMPLES, needs_bwrap
from unscaffold import notices, preflight
from unscaffold.cli import app
from unscaffold.errors import SandboxUnavailable
from unscaffold.offline.tiny import available_templates
from unscaffold.run import trial as trial_module
from unscaffold.run.aggregate import aggregate
from unscaffold.run.models import RunConfig, TrialResult
from unscaffold.run.runner import RunStalled, run
from unscaffold.suites import find

SKIP = "start it, or pass --no-preflight if it is still starting"
RAY_START = "start one with `ray start --head`, or use --executor ray for a local instance"


def free_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def invoke(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(app, args)
    return result.exit_code, result.output


@pytest.fixture(autouse=True)
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY", "OPENAI_BASE_URL", "RAY_ADDRESS"):
        monkeypatch.delenv(name, raising=False)


def test_a_model_server_that_is_not_there(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    code, out = invoke(["run", "harbor", "--data", str(HARBOR_EXAMPLES), "--student", f"openai:m@{url}",
                        "--out", str(tmp_path / "run")])
    assert (code, out) == (2, f"error: --student openai:m@{url}: no server answers at {url} (connection refused): "
                              f"{SKIP}\n")
    assert not (tmp_path / "run").exists()


def test_every_missing_resource_is_named(tmp_path: Path) -> None:
    code, out = invoke(["run", "harbor", "--data", str(HARBOR_EXAMPLES), "--student", "anthropic:claude-x",
                        "--reviewer", f"hf:tiny+{tmp_path / 'adapter'}", "--out", str(tmp_path / "run")])
    assert code == 2
    assert out.splitlines() == [
        "error: --student anthropic:claude-x: ANTHROPIC_API_KEY is not set: export it",
        f"error: --reviewer hf:tiny+{tmp_path / 'adapter'}: no adapter folder {tmp_path / 'adapter'}: train one "
        f"with `unscaffold train-sft DATA --out {tmp_path / 'adapter'}`"]


def test_a_hosted_openai_model_needs_its_key() -> None:
    assert preflight.model_problem("openai:gpt-x", "--student") == (
        "--student openai:gpt-x: OPENAI_API_KEY is not set: export it, or give a server as openai:MODEL@BASE_URL")


def test_an_adapter_folder_without_its_config(tmp_path: Path) -> None:
    (tmp_path / "adapter").mkdir()
    assert preflight.model_problem(f"hf:tiny+{tmp_path / 'adapter'}", "--student") == (
        f"--student hf:tiny+{tmp_path / 'adapter'}: {tmp_path / 'adapter'} has no adapter_config.json: give the "
        "folder train-sft wrote")
    (tmp_path / "adapter" / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA"}))
    assert preflight.model_problem(f"hf:tiny+{tmp_path / 'adapter'}", "--student") is None


def test_an_unknown_tiny_template(tmp_path: Path) -> None:
    shown = ", ".join(t for t in available_templates() if t.startswith("qwen") and not t.endswith("_training"))
    code, out = invoke(["train-sft", str(tmp_path / "data.jsonl"), "--model", "tiny:UNKNOWN", "--out",
                        str(tmp_path / "sft")])
    assert (code, out) == (2, f"error: --model tiny:UNKNOWN: TRL has no chat template 'UNKNOWN' for the tiny "
                              f"model; e.g. {shown}\n")


def test_a_hub_model_offline_fails_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, out = invoke(["train-sft", str(tmp_path / "data.jsonl"), "--model", "Qwen/Qwen3.5-9B", "--out",
                        str(tmp_path / "sft")])
    assert (code, out) == (2, "error: --model Qwen/Qwen3.5-9B: Qwen/Qwen3.5-9B is not in the Hugging Face cache "
                              "and HF_HUB_OFFLINE is set: download it where there is network (`hf download "
                              "Qwen/Qwen3.5-9B`) and pass its folder\n")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    port = free_port()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    assert preflight.model_path_problem("Qwen/Qwen3.5-9B", "--model Qwen/Qwen3.5-9B") == (
        "--model Qwen/Qwen3.5-9B: Qwen/Qwen3.5-9B is not a folder here nor in the Hugging Face cache, and "
        "127.0.0.1 cannot be reached (connection refused): download it where there is network (`hf download "
        "Qwen/Qwen3.5-9B`) and pass its folder")


def test_a_model_folder_that_is_not_there(tmp_path: Path) -> None:
    code, out = invoke(["train-sft", str(tmp_path / "data.jsonl"), "--model", str(tmp_path / "nope"), "--out",
                        str(tmp_path / "sft")])
    assert (code, out) == (2, f"error: --model {tmp_path / 'nope'}: no model folder {tmp_path / 'nope'}: give a "
                              "checkpoint folder, a Hugging Face id, or `tiny`\n")


def test_rescue_train_checks_its_profilers(tmp_path: Path) -> None:
    code, out = invoke(["rescue", "train", "appworld_lite", "--model", "tiny", "--router", "adaptive", "--profiler",
                        "anthropic:p", "--voter", "anthropic:v", "--out", str(tmp_path / "rt")])
    assert (code, out.splitlines()) == (2, ["error: --profiler anthropic:p: ANTHROPIC_API_KEY is not set: export it",
                                            "error: --voter anthropic:v: ANTHROPIC_API_KEY is not set: export it"])


def test_docker_without_a_daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/docker.sock")
    code, out = invoke(["run", "harbor", "--data", str(HARBOR_EXAMPLES), "--student", "oracle", "--sandbox",
                        "docker", "--out", str(tmp_path / "run")])
    assert (code, out) == (2, f"error: --sandbox docker: no Docker daemon answers at unix://{tmp_path}/docker.sock "
                              "(no socket): start it (`dockerd &` or `systemctl start docker`), or use --sandbox "
                              "local\n")
    port = free_port()
    monkeypatch.setenv("DOCKER_HOST", f"tcp://127.0.0.1:{port}")
    assert preflight.sandbox_problem("docker") == (
        f"--sandbox docker: no Docker daemon answers at tcp://127.0.0.1:{port} (connection refused): start it "
        "(`dockerd &` or `systemctl start docker`), or use --sandbox local")


def test_a_ray_address_with_no_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ray")
    monkeypatch.setattr(preflight, "RAY_CURRENT", tmp_path / "ray_current_cluster")
    code, out = invoke(["run", "harbor", "--data", str(HARBOR_EXAMPLES), "--student", "oracle", "--executor",
                        "ray:auto", "--out", str(tmp_path / "run")])
    assert (code, out) == (2, f"error: --executor ray:auto: no running Ray cluster on this machine: {RAY_START}\n")
    port = free_port()
    assert preflight.ray_problem(f"ray:127.0.0.1:{port}") == (
        f"--executor ray:127.0.0.1:{port}: no Ray cluster answers at 127.0.0.1:{port} (connection refused): "
        f"{RAY_START}")
    (tmp_path / "ray_current_cluster").write_text(f"127.0.0.1:{port}\n")
    assert preflight.ray_problem("ray:auto") == (
        f"--executor ray:auto: no Ray cluster answers at 127.0.0.1:{port} (connection refused): {RAY_START}")


def test_a_listening_port_that_is_not_grpc() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert preflight.grpc_problem("127.0.0.1", port, timeout_s=0.3) == "no answer within 0.3 s"


def test_evolve_names_its_roles(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    code, out = invoke(["evolve", "spreadsheet", "--student", "oracle", "--editor", f"openai:e@{url}", "--base",
                        str(tmp_path / "bank"), "--out", str(tmp_path / "ev")])
    assert (code, out) == (2, f"error: --editor openai:e@{url}: no server answers at {url} (connection refused): "
                              f"{SKIP}\n")


def test_a_retry_is_told_once_per_cause(monkeypatch: pytest.MonkeyPatch) -> None:
    said: list[str] = []
    monkeypatch.setattr(notices, "sink", said.append)
    notices.forget()
    assert notices.note_retry("APIConnectionError: port 8000 refused", "the model call is retried", 1.0)
    assert not notices.note_retry("APIConnectionError: port 8001 refused", "the model call is retried", 2.0)
    assert notices.note_retry("HTTP 503: overloaded", "trial t1 runs again (attempt 2 of 3)", 2.0)
    assert said == ["retrying: APIConnectionError: port 8000 refused: the model call is retried in 1 s (said once "
                    "per cause)", "retrying: HTTP 503: overloaded: trial t1 runs again (attempt 2 of 3) in 2 s (said "
                    "once per cause)"]


@needs_bwrap
def test_a_run_that_cannot_progress_stops_after_the_first_wave(tmp_path: Path, monkeypatch) -> None:
    def broken(config):
        raise SandboxUnavailable("sandbox did not start")

    said: list[str] = []
    monkeypatch.setattr(notices, "sink", said.append)
    notices.forget()
    monkeypatch.setattr(trial_module, "open_sandbox", broken)
    monkeypatch.setattr("unscaffold.run.runner.time.sleep", lambda s: None)
    with pytest.raises(RunStalled) as stalled:
        run(RunConfig(suite="harbor", data=HARBOR_EXAMPLES, student="oracle", out=tmp_path,
                      task_ids=["hello-file", "csv-total", "word-stats"], infra_retries=1))
    assert str(stalled.value) == ("no trial can make progress: the first trial failed for infrastructure: "
                                  "SandboxUnavailable: sandbox did not start")
    assert stalled.value.exit_code == 1
    assert sorted(p.name for p in (tmp_path / "trials").iterdir()) == ["csv-total"]
    assert said == ["retrying: SandboxUnavailable: sandbox did not start: trial csv-total runs again (attempt 2 "
                    "of 2) in 2 s (said once per cause)"]


def result(trial_id: str, outcome: str, isolation: str, infra: bool = False) -> TrialResult:
    return TrialResult(trial_id=trial_id, task_id=trial_id, reward=0.0, outcome=outcome, reason="x",
                       exit_status="error", infra_error=infra, isolation=isolation, started_at="t", ended_at="t")


def test_results_counts_agree_and_name_the_isolation(tmp_path: Path) -> None:
    from unscaffold.benchmarks import load_suite

    suite = load_suite("harbor", HARBOR_EXAMPLES)
    tasks = suite.named_tasks(["hello-file", "csv-total"], None)
    kind = "bubblewrap: read-only root, own pids, no network; commands as uid {} with no capabilities"
    summary = aggregate(suite, RunConfig(suite="harbor", student="oracle", out=tmp_path), tasks,
                        [result("hello-file", "infra_error", kind.format(61001)),
                         result("csv-total", "infra_error", kind.format(61002), infra=True)], wall_time_s=1.0)
    assert summary.infra_errors == summary.outcomes["infra_error"] == 2
    assert summary.isolation == ("bubblewrap: read-only root, own pids, no network; commands as a uid of its own "
                                 "with no capabilities")
    assert summary.isolations == {summary.isolation: 2}


# ---- the same exit rules for every command that runs trials ---------------------------------------------

NO_KEY = ('AuthError: anthropic:x: set ANTHROPIC_API_KEY ("Could not resolve authentication method. Expected one '
          'of api_key, auth_token, or credentials to be set. Or for the `Authorization` header to be explicitly '
          'omitted")')


def appworld_ids(split: str, n: int) -> str:
    from unscaffold.benchmarks import load_suite

    return ",".join(t.id for t in load_suite("appworld_lite").tasks(split)[:n])


@needs_bwrap
def test_a_routed_run_of_a_student_that_cannot_run_exits_1(tmp_path: Path) -> None:
    code, out = invoke(["run", "appworld_lite", "--harness", "route:shipped", "--student", "anthropic:x",
                        "--no-preflight", "--tasks", appworld_ids("test", 1), "--out", str(tmp_path / "run")])
    assert code == 1
    assert out.splitlines()[-1] == f"error: {NO_KEY}"
    code, out = invoke(["rescue", "route", "appworld_lite", "--student", "anthropic:x", "--no-preflight", "--tasks",
                        appworld_ids("test", 1), "--out", str(tmp_path / "route")])
    assert (code, out.splitlines()[-1]) == (1, f"error: {NO_KEY}")


@needs_bwrap
def test_evolve_stops_when_the_student_cannot_run(tmp_path: Path) -> None:
    bank = find("appworld_lite").bank
    (tmp_path / "editor.json").write_text("{}")
    code, out = invoke(["evolve", "appworld_lite", "--student", "anthropic:x", "--editor",
                        f"replay:{tmp_path / 'editor.json'}", "--base", str(bank), "--tasks",
                        appworld_ids("train", 1), "--rounds", "1", "--no-preflight", "--out", str(tmp_path / "ev")])
    assert (code, out.splitlines()[-1]) == (1, f"error: the student could not run (runs/base): {NO_KEY}")
    assert "final bank" not in out


def test_validation_refuses_a_run_that_could_not_run(tmp_path: Path) -> None:
    (tmp_path / "base").mkdir()
    from unscaffold.run.models import RunResults

    (tmp_path / "base" / "results.json").write_text(RunResults(
        suite="appworld_lite", student="anthropic:x", harness="minimal", split="train", n_tasks=2, n_trials=2,
        pass_at_1=0.0, mean_reward=0.0, per_task={}, outcomes={"infra_error": 2}, infra_cause="AuthError: no key",
        unscaffold_version="0").model_dump_json())
    code, out = invoke(["rescue", "validation", "appworld_lite", "--run", f"base={tmp_path / 'base'}", "--out",
                        str(tmp_path / "t.json")])
    assert (code, out) == (1, f"error: --run base={tmp_path / 'base'}: every trial failed for infrastructure "
                              "(AuthError: no key): run it again once the cause is fixed\n")
    assert not (tmp_path / "t.json").exists()


def test_without_preflight_ray_still_answers_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ray")
    from unscaffold.errors import InputError
    from unscaffold.run import ray_executor
    from unscaffold.run.executor import open_executor

    def no_cluster(config: RunConfig, spec: object) -> None:
        raise ConnectionError("Could not find any running Ray instance. Please specify the one to connect to.\n"
                              "(and many more lines)")

    monkeypatch.setattr(ray_executor, "RayExecutor", no_cluster)
    with pytest.raises(InputError) as refused:
        open_executor(RunConfig(suite="harbor", student="oracle", out=tmp_path, executor="ray:auto"))
    assert str(refused.value) == ("--executor: no Ray cluster answers at auto: Could not find any running Ray "
                                  "instance. Please specify the one to connect to; start one with `ray start "
                                  "--head`, or use --executor ray")


def test_a_server_that_serves_another_model(monkeypatch: pytest.MonkeyPatch) -> None:
    import http.server
    import threading

    class Models(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            body = json.dumps({"object": "list", "data": [{"id": "Qwen/Qwen3-8B", "object": "model"}]}).encode()
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Models)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        assert preflight.model_problem(f"openai:Qwen/Qwen3-8B@{url}", "--student") is None
        assert preflight.model_problem(f"openai:qwen3@{url}", "--student") == (
            f"--student openai:qwen3@{url}: the server at {url} serves Qwen/Qwen3-8B, not qwen3")
    finally:
        server.shutdown()
