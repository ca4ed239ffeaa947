"""Trials on a multi-node Ray cluster made inside this machine (`ray.cluster_utils.Cluster`, one CPU a node):
the same run folder as local threads, a lost node, a killed driver, and the cluster-wide reviewer cap."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from perf.harness_overhead import make_tasks
from tests.helpers import HARBOR_EXAMPLES, HARBOR_REPLAY, ROOT, call, eventually, final, needs_bwrap
from unscaffold.minimal_harness.atif import export_run
from unscaffold.run.folder import RunFolder
from unscaffold.run.models import RunConfig
from unscaffold.run.runner import run
from unscaffold.sft.build import build_sft

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'unscaffold[ray]')")
cluster_utils = pytest.importorskip("ray.cluster_utils")

pytestmark = needs_bwrap
EXPECTED = {"csv-total": 1.0, "fix-fibonacci": 0.8, "hello-file": 1.0, "word-stats": 0.0}
REVIEWER_REPLAY = HARBOR_EXAMPLES.parent / "replay" / "harbor_reviewer.json"
def all_passed(n: int) -> dict[str, float]:
    return {f"t{i:02d}": 1.0 for i in range(n)}


NODE = {"num_cpus": 1, "object_store_memory": 80 * 2**20}
FAST_HEALTH_CHECKS = {"health_check_initial_delay_ms": 0, "health_check_period_ms": 500,
                      "health_check_failure_threshold": 4}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A head and two worker nodes of one CPU each; the test process is the driver."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ["OPENAI_API_KEY"] = "test-key"  # workers inherit it (the reviewer-cap test's fake server)
    os.environ["NO_PROXY"] = "127.0.0.1"
    made = cluster_utils.Cluster(initialize_head=True,
                                 head_node_args={**NODE, "_system_config": FAST_HEALTH_CHECKS})
    for _ in range(2):
        made.add_node(**NODE)
    made.wait_for_nodes()
    ray.init(address=made.address, logging_level="WARNING")
    yield made
    ray.shutdown()
    made.shutdown()


def collection(out: Path, executor: str, **overrides: Any) -> RunConfig:
    fields: dict[str, Any] = {"suite": "harbor", "data": HARBOR_EXAMPLES, "student": f"replay:{HARBOR_REPLAY}",
                              "reviewer": f"replay:{REVIEWER_REPLAY}", "concurrency": 3, "out": out,
                              "executor": executor, **overrides}
    return RunConfig(**fields)


TIMING = {"started_at", "ended_at", "wall_s", "model_s", "exec_s", "duration_s", "isolation"}  # isolation: the uid


def untimed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if k not in TIMING}
    return [untimed(v) for v in value] if isinstance(value, list) else value


def unordered(command: dict[str, Any]) -> dict[str, Any]:
    """A command's evidence without the order and process ids of its events (both up to the scheduler)."""
    events = [{k: v for k, v in e.items() if k not in ("seq", "pid")} for e in command.get("events", [])]
    return {**untimed(command), "events": sorted(events, key=lambda e: json.dumps(e, sort_keys=True))}


def trial_files(run_dir: Path) -> dict[str, Any]:
    """Every file of every trial, with what does not depend on timing or on the sandbox's uid."""
    out: dict[str, Any] = {}
    for path in sorted((run_dir / "trials").rglob("*")):
        if not path.is_file():
            continue
        name = str(path.relative_to(run_dir))
        if path.suffix == ".json":
            out[name] = untimed(json.loads(path.read_text()))
        elif path.name == "evidence.jsonl":  # the processes of a pipeline run at once: their events in any order
            out[name] = [unordered(json.loads(line)) for line in path.read_text().splitlines()]
        elif path.suffix == ".jsonl":
            out[name] = [untimed(json.loads(line)) for line in path.read_text().splitlines()]
        else:
            out[name] = path.read_bytes()
    return out


def test_a_collection_on_the_cluster_gives_the_local_run_folder(cluster: Any, tmp_path: Path) -> None:
    local = run(collection(tmp_path / "local", "local"))
    remote = run(collection(tmp_path / "ray", f"ray:{cluster.address}"))
    assert remote.per_task == local.per_task == dict.fromkeys(EXPECTED, 1.0)  # the reviewer fixed two tasks
    assert remote.replacements == local.replacements > 0
    assert remote.reviewer_calls == local.reviewer_calls
    assert trial_files(tmp_path / "ray") == trial_files(tmp_path / "local")
    kinds = {kind.split(";")[0] for kind in remote.isolations}
    assert kinds == {"bubblewrap: read-only root, writable workspace, private /tmp, own pids, no network"}
    local_rows = build_sft([tmp_path / "local"], tmp_path / "local.jsonl")
    remote_rows = build_sft([tmp_path / "ray"], tmp_path / "ray.jsonl")
    assert remote_rows.kept == local_rows.kept and remote_rows.dropped == local_rows.dropped
    assert (tmp_path / "ray.jsonl").read_text() == (tmp_path / "local.jsonl").read_text()
    assert len(export_run(RunFolder(tmp_path / "ray"), None)) == 4
    again = run(collection(tmp_path / "ray", f"ray:{cluster.address}"))  # resume: nothing left to run
    events = [json.loads(x) for x in (tmp_path / "ray" / "events.jsonl").read_text().splitlines()]
    assert again.per_task == local.per_task and sum(e["event"] == "trial_started" for e in events) == 4


def slow_student(tmp_path: Path, latency: float) -> str:
    replay = tmp_path / "slow.json"
    replay.write_text(json.dumps({"*": [call("echo ok > out.txt"), call("true"), call("true"), final("done")]}))
    return f"replay:{replay}?latency={latency}"


def trial_running_on(node: Any) -> bool:
    """A trial's scratch folder (`trial-PID-...`) belongs to a worker process of that node's raylet."""
    import psutil

    from unscaffold.run.shipping import CACHE

    raylet = psutil.Process(node.all_processes["raylet"][0].process.pid)
    workers = {str(p.pid) for p in raylet.children(recursive=True)}
    return any(folder.name.split("-")[1] in workers for folder in CACHE.glob("trial-*-*"))


def events_of(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]


def test_a_node_lost_mid_run_reruns_its_trial_elsewhere(cluster: Any, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("unscaffold.run.runner.time.sleep", lambda s: None)  # the retry back-off
    doomed = cluster.add_node(**NODE)
    cluster.wait_for_nodes()
    out = tmp_path / "run"

    def remove_when_busy() -> None:  # as soon as a trial runs there, the node goes
        eventually(lambda: trial_running_on(doomed), timeout_s=60)
        cluster.remove_node(doomed, allow_graceful=False)

    killer = threading.Thread(target=remove_when_busy)
    killer.start()
    summary = run(RunConfig(suite="harbor", data=make_tasks(tmp_path / "tasks", 8), student=slow_student(tmp_path, 0.5),
                            concurrency=4, out=out, executor=f"ray:{cluster.address}"))
    killer.join()
    assert summary.per_task == all_passed(8)
    assert summary.infra_retried >= 1 and summary.infra_errors == 0
    events = events_of(out)
    assert sorted(e["trial_id"] for e in events if e["event"] == "trial_finished") == sorted(all_passed(8))
    retried = [e for e in events if e["event"] == "trial_retry"]
    assert retried and all(e["exception"] for e in retried)
    for e in retried:  # the re-run is the one recorded
        assert json.loads((out / "trials" / e["trial_id"] / "result.json").read_text())["attempt"] > e["attempt"]


def interrupted_then_resumed(cluster: Any, tmp_path: Path, sig: signal.Signals) -> dict[str, str]:
    """Start a driver whose student passes two tasks and hangs in every other, signal it once those two have
    finished (so it always stops half way), re-run with a student that passes everything: every trial recorded
    once, the finished ones untouched. Returns the results that were there before the re-run."""
    out = tmp_path / "run"
    student = slow_student(tmp_path, 0.0)
    replay = Path(student.removeprefix("replay:").partition("?")[0])
    passing = replay.read_text()
    replay.write_text(json.dumps({**{t: json.loads(passing)["*"] for t in ("t00", "t01")},
                                  "*": [call("sleep 1000")] * 200}))
    argv = [sys.executable, "-m", "unscaffold.cli", "run", "harbor", "--data", str(make_tasks(tmp_path / "tasks", 6)),
            "--student", student, "--concurrency", "3", "--out", str(out),
            "--executor", f"ray:{cluster.address}"]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    assert eventually(lambda: len(list(out.glob("trials/*/result.json"))) == 2, timeout_s=120)
    proc.send_signal(sig)
    assert proc.wait(timeout=60) != 0
    replay.write_text(passing)
    finished_before = {p.parent.name: p.read_text() for p in out.glob("trials/*/result.json")}
    assert sorted(finished_before) == ["t00", "t01"] and not (out / "results.json").exists()
    subprocess.run(argv, cwd=ROOT, check=True, capture_output=True, timeout=240)
    assert json.loads((out / "results.json").read_text())["per_task"] == all_passed(6)
    for name, text in finished_before.items():  # finished trials were not run again
        assert (out / "trials" / name / "result.json").read_text() == text
    finished = [e["trial_id"] for e in events_of(out) if e["event"] == "trial_finished"]
    assert sorted(finished) == sorted(all_passed(6))
    return finished_before


def test_sigkill_of_the_driver_then_a_rerun_resumes(cluster: Any, tmp_path: Path) -> None:
    interrupted_then_resumed(cluster, tmp_path, signal.SIGKILL)


@pytest.mark.slow
def test_ctrl_c_stops_the_run_and_leaves_it_resumable(cluster: Any, tmp_path: Path) -> None:
    before = interrupted_then_resumed(cluster, tmp_path, signal.SIGINT)
    events = events_of(tmp_path / "run")
    for trial_id in before:  # a trial that had finished before Ctrl-C was started once
        assert sum(e["event"] == "trial_started" and e["trial_id"] == trial_id for e in events) == 1


@pytest.mark.slow
def test_trials_avoid_a_node_whose_sandbox_cannot_start(cluster: Any, tmp_path: Path, monkeypatch) -> None:
    """A node without bubblewrap on its PATH fails the start-up probe; no trial is sent there (one that were
    would fail to start its sandbox and show as an infrastructure retry)."""
    from unscaffold.run.ray_executor import RayExecutor

    no_bwrap = cluster.add_node(**NODE, env_vars={"PATH": str(Path(sys.executable).parent)})
    cluster.wait_for_nodes()
    excluded: list[set[str]] = []
    probe = RayExecutor._probe_nodes

    def recorded(self: RayExecutor, config: RunConfig) -> None:
        probe(self, config)
        excluded.append(set(self.excluded))

    monkeypatch.setattr(RayExecutor, "_probe_nodes", recorded)
    try:
        summary = run(RunConfig(suite="harbor", data=make_tasks(tmp_path / "tasks", 8),
                                student=slow_student(tmp_path, 0.05), concurrency=4, out=tmp_path / "run",
                                executor=f"ray:{cluster.address}"))
    finally:
        cluster.remove_node(no_bwrap)
    assert summary.per_task == all_passed(8)
    assert excluded == [{no_bwrap.node_id}]
    assert summary.infra_retried == 0 and all(kind.startswith("bubblewrap") for kind in summary.isolations)


class CountingReviewerServer:
    """An OpenAI-compatible reviewer that counts the calls in flight; the first call waits (up to a deadline)
    for as many others as the cap allows, so reaching the cap is certain and exceeding it would show."""

    def __init__(self, cap: int) -> None:
        self.cap, self.now, self.peak, self.calls = cap, 0, 0, 0
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server naming)
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with owner.lock:
                    owner.now += 1
                    owner.calls += 1
                    owner.peak = max(owner.peak, owner.now)
                eventually(lambda: owner.peak >= owner.cap, timeout_s=20)
                time.sleep(0.15)
                with owner.lock:
                    owner.now -= 1
                data = json.dumps(owner.answer()).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, args=(0.01,), daemon=True).start()

    @staticmethod
    def answer() -> dict[str, Any]:
        arguments = json.dumps({"decision": "PASS", "reason": "looks right"})
        return {"id": "c", "object": "chat.completion", "created": 1, "model": "reviewer",
                "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                    "role": "assistant", "content": None,
                    "tool_calls": [{"id": "r1", "type": "function",
                                    "function": {"name": "submit_review", "arguments": arguments}}]}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


def test_the_reviewer_cap_holds_across_the_cluster(cluster: Any, tmp_path: Path) -> None:
    server = CountingReviewerServer(cap=2)
    try:
        summary = run(RunConfig(suite="harbor", data=make_tasks(tmp_path / "tasks", 6),
                                student=slow_student(tmp_path, 0.05), reviewer=f"openai:reviewer@{server.url}",
                                reviewer_concurrency=2, concurrency=3, out=tmp_path / "run",
                                executor=f"ray:{cluster.address}"))
    finally:
        server.httpd.shutdown()
    assert summary.per_task == all_passed(6)
    assert summary.reviewer_calls == server.calls == 6 * 4  # every step reviewed, each call counted
    assert server.peak == 2


def test_slots_an_attempt_still_holds_are_freed_when_it_ends(cluster: Any) -> None:
    """A worker that dies mid-call never gives its slot back; the driver frees what that attempt held."""
    from unscaffold.run.call_slots import RaySlot, SlotsActor

    slots = ray.remote(SlotsActor).remote({"reviewer": 1})

    @ray.remote(num_cpus=0)
    def take_and_vanish(actor: Any) -> None:
        RaySlot(actor, "reviewer").__enter__()

    ref = take_and_vanish.remote(slots)
    ray.get(ref)
    assert ray.get(slots.stats.remote())["used"] == {"reviewer": 1}
    assert ray.get(slots.release_holder.remote(ref.task_id().hex())) == 1
    assert ray.get(slots.stats.remote())["used"] == {"reviewer": 0}
    ray.get(take_and_vanish.remote(slots))  # the slot can be taken again


@pytest.mark.slow
def test_the_command_with_a_local_ray_instance(tmp_path: Path) -> None:
    """`--executor ray` starts its own Ray instance for the run and gives the local executor's scores."""
    argv = [sys.executable, "-m", "unscaffold.cli", "run", "harbor", "--data", str(HARBOR_EXAMPLES), "--student",
            f"replay:{HARBOR_REPLAY}", "--concurrency", "4", "--executor", "ray?cpus=0.5", "--out", str(tmp_path)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((tmp_path / "results.json").read_text())["per_task"] == EXPECTED
