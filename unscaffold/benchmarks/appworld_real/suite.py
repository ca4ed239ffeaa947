"""`appworld`: the real AppWorld benchmark, run under h and scored by AppWorld's own evaluator.

AppWorld needs pydantic 1, so it lives in its own environment; this suite never imports it. Per trial
it starts `bridge.py` under that environment's Python, holding the task's world; the student's
`apis.py` (the same client appworld_lite uses) reaches it through a Unix socket in the workspace, and
`score` asks the bridge for AppWorld's verdict. See README.md in this folder for the set-up."""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import select
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from unscaffold.benchmarks.base import APP_WORLD_OUTPUT_CUT, Score, Suite, Task
from unscaffold.errors import InputError
from unscaffold.llm.types import Message
from unscaffold.minimal_harness.sandbox.base import Sandbox, SandboxConfig, SandboxKind
from unscaffold.minimal_harness.trajectory import Trajectory
from unscaffold.offline.appworld_lite import apis as lite_apis
from unscaffold.offline.appworld_lite.apis import SOCKET_FILE, STATE_DIR, ApiError, SocketTransport
from unscaffold.offline.appworld_lite.metrics import goal_completion
from unscaffold.offline.appworld_lite.opening import APPWORLD_DEMO, build_opening
from unscaffold.offline.appworld_lite.prompt import task_message

HERE = Path(__file__).resolve().parent
LITE_APIS = Path(lite_apis.__file__)  # the app client, shared with appworld_lite
BRIDGE = HERE / "bridge.py"
SPLITS = ("train", "dev", "test_normal", "test_challenge")
DEFAULT_SPLIT = "test_normal"
WORKDIR = "/workspace"
PYTHON_CANDIDATES = (".venv/bin/python", "venv/bin/python", "env/bin/python")
README = "unscaffold/benchmarks/appworld_real/README.md"
STARTUP_TIMEOUT_S = 600.0
EVALUATE_TIMEOUT_S = 600.0


def find_root(data: Path | None) -> Path:
    """`--data`, else $APPWORLD_ROOT: the folder holding AppWorld's `data/` (from `appworld download data`)."""
    root = data or (Path(os.environ["APPWORLD_ROOT"]) if os.environ.get("APPWORLD_ROOT") else None)
    if root is None:
        raise InputError("--data", None, f"the appworld suite needs --data APPWORLD_ROOT (or $APPWORLD_ROOT); "
                         f"see {README}")
    root = Path(root).resolve()
    if not (root / "data" / "datasets").is_dir():
        raise InputError(str(root), None, f"no data/datasets/ here: run `appworld download data` in this folder "
                         f"first (see {README})")
    return root


def find_python(root: Path) -> Path:
    """$APPWORLD_PYTHON, else a virtual environment inside the AppWorld root."""
    named = os.environ.get("APPWORLD_PYTHON")
    candidates = [Path(named)] if named else [root / c for c in PYTHON_CANDIDATES]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    where = f"APPWORLD_PYTHON={named}" if named else f"{root}/{{{','.join(PYTHON_CANDIDATES)}}}"
    raise InputError("APPWORLD_PYTHON", None, f"no Python with AppWorld found at {where}; set APPWORLD_PYTHON to "
                     f"the python of the environment where `pip install appworld` ran (see {README})")


def bridge_command(python: Path, task_id: str, experiment: str, socket_path: Path,
                   idle_timeout_s: float = 3600.0) -> list[str]:
    """The bridge's command line: AppWorld's Python, our standalone script, the task and where to listen."""
    return [str(python), str(BRIDGE), "serve", "--task-id", task_id, "--experiment", experiment,
            "--socket", str(socket_path), "--idle-timeout", str(idle_timeout_s)]


def experiment_name(trial_dir: Path) -> str:
    """AppWorld writes outputs under experiments/outputs/<name>/: one name per trial, so trials never clash."""
    return "unscaffold-" + hashlib.sha1(str(trial_dir.resolve()).encode()).hexdigest()[:12]


def scenario_of(task_id: str) -> str:
    """AppWorld task ids are `<scenario>_<n>` (e.g. 82e2fac_1): the three tasks of a scenario share the prefix."""
    return task_id.rsplit("_", 1)[0]


class Bridge:
    """One running bridge process; always stopped, even when the trial crashed before scoring."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str], log_path: Path, socket_path: Path) -> None:
        self.socket_path, self.log_path = socket_path, log_path
        self._log = open(log_path, "ab")
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=self._log, start_new_session=True)

    def wait_ready(self, timeout_s: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        line = b""
        while not line.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            ready = select.select([self.proc.stdout], [], [], max(remaining, 0))[0] if remaining > 0 else []
            if not ready:
                self.stop()
                raise RuntimeError(f"the AppWorld bridge did not start within {timeout_s:.0f} s ({self.log_tail()})")
            chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
            if not chunk:
                self.stop()
                raise RuntimeError(f"the AppWorld bridge exited while starting ({self.log_tail()})")
            line += chunk
        try:
            status = json.loads(line)
        except ValueError:
            status = {"ready": False, "error": line.decode(errors="replace")[:300]}
        if not status.get("ready"):
            self.stop()
            raise RuntimeError(f"the AppWorld bridge could not open the task: {status.get('error')}")
        return status

    def request(self, payload: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        return SocketTransport(self.socket_path, timeout_s=timeout_s).request(payload)

    def log_tail(self, size: int = 600) -> str:
        self._log.flush()
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return text[-size:].strip() or "no output; see the bridge log"

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ApiError, OSError, ValueError):
                self.request({"op": "close"}, timeout_s=30)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, 9)
                self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        self._log.close()


class AppWorldSuite(Suite):
    output_cut_chars = APP_WORLD_OUTPUT_CUT

    def __init__(self, data: Path | None = None) -> None:
        self.root = find_root(data)
        super().__init__(self.root)
        self.python = find_python(self.root)
        self._bridges: dict[Path, Bridge] = {}
        self._lock = threading.Lock()
        atexit.register(self.close)

    openings = ("demonstration", "plain")  # the plain start gives invalid AppWorld scores (opening.py)

    def splits(self) -> list[str | None]:
        if self.split_file is not None:
            return self.split_file_splits()
        return [s for s in SPLITS if (self.root / "data" / "datasets" / f"{s}.txt").is_file()]

    def task_ids(self, split: str) -> list[str]:
        path = self.root / "data" / "datasets" / f"{split}.txt"
        if not path.is_file():
            raise InputError("--split", None, f"{path} not found; AppWorld splits: {', '.join(SPLITS)}")
        return [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]

    def tasks(self, split: str | None = None) -> list[Task]:
        """A split's tasks (default test_normal), each with the supervisor and instruction from its specs.json."""
        if self.split_file is not None:
            return self.split_file_tasks(split)
        split = split or DEFAULT_SPLIT
        out = []
        for task_id in self.task_ids(split):
            specs_path = self.root / "data" / "tasks" / task_id / "specs.json"
            try:
                specs = json.loads(specs_path.read_text(encoding="utf-8"))
                instruction = task_message(specs["supervisor"], specs["instruction"])
            except FileNotFoundError:
                raise InputError(str(specs_path), None, "file not found (is the AppWorld data complete?)") from None
            except (ValueError, KeyError, TypeError) as e:
                raise InputError(str(specs_path), None, f"not an AppWorld task spec: {e}") from None
            out.append(Task(id=task_id, instruction=instruction, split=split, scenario=scenario_of(task_id),
                            meta={"supervisor": specs["supervisor"], "task": specs["instruction"]}))
        return out

    def prepare(self, task: Task, trial_dir: Path, kind: SandboxKind, *, oracle: bool = False) -> SandboxConfig:
        """The client in the workspace, then a bridge holding the task's world behind `.apps/world.sock`."""
        workspace = trial_dir / "workspace"
        state = workspace / STATE_DIR
        state.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(LITE_APIS, workspace / "apis.py")
        (state / "task.json").write_text(json.dumps({"task_id": task.id}, indent=2) + "\n", encoding="utf-8")
        socket_path = state / SOCKET_FILE
        argv = bridge_command(self.python, task.id, experiment_name(trial_dir), socket_path)
        env = {**os.environ, "APPWORLD_ROOT": str(self.root)}
        bridge = Bridge(argv, self.root, env, trial_dir / "bridge.log", socket_path)
        bridge.wait_ready(STARTUP_TIMEOUT_S)  # stops the bridge itself when it fails
        with self._lock:
            self._bridges[trial_dir.resolve()] = bridge
        return SandboxConfig(kind=kind, workspace=workspace, workdir=None if kind == "none" else WORKDIR)

    def opening(self, task: Task, trial_dir: Path, style: str) -> list[Message] | None:
        """The official first turn (see opening.py): the real supervisor from the task's specs and the app
        descriptions from the task's own world, asked through its bridge as the official agent asks its
        environment."""
        if style != "demonstration":
            return None
        transport = SocketTransport(trial_dir / "workspace" / STATE_DIR / SOCKET_FILE)
        apps, _ = transport.call("api_docs", "show_app_descriptions", {})
        return build_opening(APPWORLD_DEMO, task.meta["task"], task.meta["supervisor"], apps)

    def oracle_commands(self, task: Task) -> list[str]:
        raise InputError("--student", None, "the appworld suite has no oracle (AppWorld's reference solutions "
                         "are not published for every split); validate the harness with appworld_lite")

    def score(self, task: Task, trial_dir: Path, sandbox: Sandbox, trajectory: Trajectory) -> Score:
        """AppWorld's evaluator decides (its tests, collateral damage included); then the bridge is stopped."""
        with self._lock:
            bridge = self._bridges.pop(trial_dir.resolve(), None)
        if bridge is None:
            return Score(reward=0.0, reason="no AppWorld bridge for this trial")
        try:
            reply = bridge.request({"op": "evaluate"}, timeout_s=EVALUATE_TIMEOUT_S)
        except ApiError as e:
            return Score(reward=0.0, reason=f"AppWorld evaluation failed: {e}")
        finally:
            bridge.stop()
        details = {k: reply.get(k) for k in ("num_tests", "passes", "failures", "completed")}
        details["experiment"] = experiment_name(trial_dir)
        if not reply.get("ok"):
            return Score(reward=0.0, reason=f"AppWorld evaluation failed: {str(reply.get('error'))[:300]}",
                         details=details)
        if reply.get("success"):
            return Score(reward=1.0, details=details)
        return Score(reward=0.0, reason=f"AppWorld tests failed ({reply.get('passes')}/{reply.get('num_tests')} "
                     "passed)", details=details)

    def metrics(self, tasks: list[Task], rewards: dict[str, float]) -> dict[str, float]:
        return goal_completion(tasks, rewards)


    def release(self, trial_dir: Path) -> None:
        """Stop the bridge of a trial that will not be scored."""
        with self._lock:
            bridge = self._bridges.pop(trial_dir.resolve(), None)
        if bridge is not None:
            bridge.stop()

    def close(self) -> None:
        """Stop every bridge still running (trials that crashed before scoring)."""
        with self._lock:
            bridges, self._bridges = list(self._bridges.values()), {}
        for bridge in bridges:
            bridge.stop()
