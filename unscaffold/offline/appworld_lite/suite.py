"""`appworld_lite`: a self-contained app world (six apps plus supervisor and api_docs over SQLite), 39
scenarios of 3 tasks, state-based verification and AppWorld's TGC/SGC.

Per trial, the workspace gets `apis.py` (the client) and `.apps/task.json` (the request, no gold); the
task's world is `TRIAL/world/world.db`, outside the workspace, and a server on the host (`server.py`, the
suite's `services`) answers the student's API calls on `.apps/world.sock`: the world is reachable through
the apps only. The gold (the changes and the answer) stays in this process and a copy of the initial
world in `TRIAL/gold/`."""

from __future__ import annotations

import contextlib
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

from unscaffold.benchmarks.base import APP_WORLD_OUTPUT_CUT, Score, Suite, Task
from unscaffold.errors import InputError
from unscaffold.llm.types import Message
from unscaffold.minimal_harness.sandbox.base import Sandbox, SandboxConfig, SandboxKind
from unscaffold.minimal_harness.trajectory import Trajectory

from .apps import APP_DESCRIPTIONS
from .catalog import SPLITS, LiteTask, catalog
from .metrics import goal_completion
from .opening import LITE_DEMO, build_opening
from .server import DB_FILE, WorldServer, serve, served
from .verify import verify
from .world import demo_world, install_client

HERE = Path(__file__).resolve().parent
WORKDIR = "/workspace"
GOLD = "gold"
WORLD = "world"
MIN_MARKER = 4  # shorter answers (small counts) would match ordinary text in K


class AppWorldLiteSuite(Suite):
    openings = ("plain", "demonstration")
    output_cut_chars = APP_WORLD_OUTPUT_CUT

    def __init__(self, data: Path | None = None) -> None:
        if data is not None:
            raise InputError("--data", None, "appworld_lite generates its own tasks and takes no --data")
        super().__init__(None)
        self._servers: dict[Path, WorldServer] = {}
        self._lock = threading.Lock()

    def lite_task(self, task: Task | str) -> LiteTask:
        return catalog()[task if isinstance(task, str) else task.id]

    def splits(self) -> list[str | None]:
        return list(SPLITS)

    def tasks(self, split: str | None = None) -> list[Task]:
        if split is not None and split not in SPLITS:
            raise InputError("--split", None, f"appworld_lite has the splits {', '.join(SPLITS)}, not {split!r}")
        return [
            Task(id=t.id, instruction=t.instruction, split=t.split, scenario=t.scenario,
                 meta={"template": t.template.name, "needs_all_pages": t.instance.needs_all_pages})
            for t in catalog().values() if split is None or t.split == split
        ]

    def prepare(self, task: Task, trial_dir: Path, kind: SandboxKind, *, oracle: bool = False) -> SandboxConfig:
        """The client and the request in the workspace; the task's world beside it (served by `services`),
        and a copy of it for the verifier to diff against."""
        lt = self.lite_task(task)
        workspace = trial_dir / "workspace"
        install_client(workspace, {"task_id": lt.id, "task": lt.template.task(lt.instance.params),
                                   "supervisor": lt.world.supervisor_dict()})
        lt.world.write(trial_dir / WORLD / DB_FILE)
        (trial_dir / GOLD).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(trial_dir / WORLD / DB_FILE, trial_dir / GOLD / "initial.db")
        return SandboxConfig(kind=kind, workspace=workspace, workdir=None if kind == "none" else WORKDIR,
                             network=False)

    @contextlib.contextmanager
    def services(self, task: Task, trial_dir: Path) -> Iterator[None]:
        """The world's server, for the trial's whole life; `score` stops it first, so the world it judges is final."""
        key = trial_dir.resolve()
        with serve(trial_dir / WORLD / DB_FILE, trial_dir / "workspace") as server:
            with self._lock:
                self._servers[key] = server
            try:
                yield
            finally:
                with self._lock:
                    self._servers.pop(key, None)

    @contextlib.contextmanager
    def example_workspace(self, workspace: Path) -> Iterator[None]:
        """A demo world (no task's) served to the h* tools' examples."""
        with served(demo_world(), workspace):
            yield

    def oracle_commands(self, task: Task) -> list[str]:
        return self.lite_task(task).commands()

    def opening(self, task: Task, trial_dir: Path, style: str) -> list[Message] | None:
        """`--opening demonstration`: AppWorld's official first-turn structure with this suite's own worked
        example (opening.py), so the two app worlds can be compared start for start."""
        if style != "demonstration":
            return None
        lt = self.lite_task(task)
        apps = [{"name": name, "description": text} for name, text in APP_DESCRIPTIONS.items()]
        return build_opening(LITE_DEMO, lt.template.task(lt.instance.params), lt.world.supervisor_dict(), apps)

    def score(self, task: Task, trial_dir: Path, sandbox: Sandbox, trajectory: Trajectory) -> Score:
        """Diff the final world against the initial one; the gold outcome never enters the sandbox."""
        with self._lock:
            server = self._servers.get(trial_dir.resolve())
        if server is not None:
            server.stop()  # no call the student left running can change the world while it is judged
        lt = self.lite_task(task)
        score = verify(trial_dir / GOLD / "initial.db", trial_dir / WORLD / DB_FILE, lt.instance.outcome)
        score.details["needs_all_pages"] = lt.instance.needs_all_pages
        return score

    def metrics(self, tasks: list[Task], rewards: dict[str, float]) -> dict[str, float]:
        return goal_completion(tasks, rewards)

    def leak_markers(self, tasks: list[Task] | None = None) -> list[str]:
        """Task ids, scenario ids and every answer long enough to be distinctive."""
        markers = set(super().leak_markers(tasks))
        wanted = {t.id for t in tasks} if tasks is not None else None
        for t in catalog().values():
            if wanted is not None and t.id not in wanted:
                continue
            markers.add(t.scenario)
            answer = t.instance.outcome.answer
            if answer is not None and len(str(answer)) >= MIN_MARKER:
                markers.add(str(answer))
        return sorted(markers)

