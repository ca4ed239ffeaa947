"""The `harbor` suite: any folder of Harbor tasks, run under h and scored by its own verifier."""

from __future__ import annotations

import shlex
from pathlib import Path

from unscaffold.benchmarks.base import Score, Suite, Task
from unscaffold.errors import EnvironmentBroken, InputError
from unscaffold.iojson import write_text_atomic
from unscaffold.minimal_harness.sandbox.base import Mount, Sandbox, SandboxConfig, SandboxKind
from unscaffold.minimal_harness.trajectory import Trajectory
from unscaffold.nofollow import RefusedPath, copy_in
from unscaffold.offline.dockerfile import LocalPlan, apply_copies, host_like, local_plan, read_task_text
from unscaffold.outcomes import Outcome
from unscaffold.untrusted import clear_folder

from .reward import read_reward
from .task_folder import HarborTask, find_tasks, refusal

VERIFIER_COMMAND = "bash /tests/test.sh"
TESTS = "tests"  # in the trial folder: filled with the task's tests just before they run
VERIFIER_TAIL = 400  # characters of the verifier's output quoted in a failure's reason


class HarborSuite(Suite):

    def __init__(self, data: Path | None = None) -> None:
        super().__init__(data)
        if self.data is None:
            raise InputError("--data", None, "the harbor suite needs --data DIR (a task folder or a folder of them)")
        tasks, self._skipped = find_tasks(self.data)
        self._tasks = {t.id: t for t in tasks}

    def skipped_tasks(self) -> dict[str, str]:
        return dict(self._skipped)

    def local_plan(self, task: Task) -> LocalPlan:
        """How the local sandbox applies the task's Dockerfile (and task.toml's image) and what it cannot."""
        ht = self.harbor_task(task)
        plan = local_plan(ht.dockerfile, ht.workdir) if ht.dockerfile else LocalPlan(workdir=ht.workdir)
        image = ht.config.environment.docker_image
        if image and not host_like(image):
            plan.skipped.insert(0, f"task.toml: docker_image = {image!r} (the local sandbox has no such image)")
            plan.not_applied.insert(0, plan.skipped[0])
        return plan

    def environment_gaps(self, task: Task, kind: SandboxKind) -> list[str]:
        if kind != "local":
            return []
        try:
            return self.local_plan(task).skipped
        except RefusedPath as e:
            return [str(refusal(e))]

    def environment_notes(self, task: Task, kind: SandboxKind) -> list[str]:
        return self.local_plan(task).not_applied if kind == "local" else []

    def named_splits(self) -> set[str]:
        """With no split file, the splits the tasks' own `[metadata] split` name."""
        if self.split_file is not None:
            return super().named_splits()
        return {str(t.config.metadata["split"]) for t in self._tasks.values() if t.config.metadata.get("split")}

    def harbor_task(self, task: Task) -> HarborTask:
        return self._tasks[task.id]

    def splits(self) -> list[str | None]:
        if self.split_file is not None:
            return self.split_file_splits()
        return [None]

    def tasks(self, split: str | None = None) -> list[Task]:
        if self.split_file is not None:
            return self.split_file_tasks(split)
        out = []
        for t in self._tasks.values():
            task_split = t.config.metadata.get("split")
            if split and task_split and task_split != split:
                continue
            out.append(
                Task(
                    id=t.id,
                    instruction=t.instruction,
                    split=task_split,
                    network=t.config.environment.allow_internet,
                    agent_timeout_s=t.config.agent.timeout_sec,
                )
            )
        return out

    def prepare(self, task: Task, trial_dir: Path, kind: SandboxKind, *, oracle: bool = False) -> SandboxConfig:
        if kind == "none":
            raise InputError("--sandbox", None, "harbor tasks need `local` or `docker`: their paths (/app, /tests) "
                             "only exist inside a sandbox")
        ht = self.harbor_task(task)
        workspace = trial_dir / "workspace"
        workspace.mkdir(parents=True, exist_ok=True)
        try:  # the folder was checked for links when read; a link made since is refused here
            plan = self.local_plan(task)
            if kind == "local":
                apply_copies(plan, workspace)
            if ht.seed_dir:
                copy_in(ht.root, "environment/workspace", workspace, ".")
        except RefusedPath as e:
            raise EnvironmentBroken(str(refusal(e))) from None
        (trial_dir / "logs" / "verifier").mkdir(parents=True, exist_ok=True)
        (trial_dir / "logs" / "agent").mkdir(parents=True, exist_ok=True)
        (trial_dir / TESTS).mkdir(exist_ok=True)
        mounts = [
            Mount(source=trial_dir / "logs" / "verifier", target="/logs/verifier", writable=True),
            Mount(source=trial_dir / "logs" / "agent", target="/logs/agent", writable=True),
            Mount(source=trial_dir / TESTS, target="/tests", writable=True),  # empty until the verifier runs
        ]
        if oracle and ht.solution:
            mounts.append(Mount(source=ht.solution.parent, target="/solution"))
        config = SandboxConfig(kind=kind, workspace=workspace, workdir=ht.workdir, mounts=mounts, network=task.network,
                               env=plan.env if kind == "local" else {})
        if kind == "docker":  # the task's own image, as Harbor runs it, its workdir shown in the workspace
            config.image = ht.config.environment.docker_image
            config.build = None if config.image or not ht.dockerfile else ht.dockerfile.parent
            config.seed_from_image = bool(config.image or config.build)
        return config

    def leak_markers(self, tasks: list[Task] | None = None) -> list[str]:
        """Task ids and the distinctive lines of each reference solution."""
        markers = set(super().leak_markers(tasks))
        wanted = {t.id for t in tasks} if tasks is not None else None
        for t in self._tasks.values():
            if t.solution and (wanted is None or t.id in wanted):
                try:
                    text = read_task_text(t.solution)
                except RefusedPath:
                    continue  # a link made since the folder was read: never followed
                for line in text.splitlines():
                    line = line.strip()
                    if len(line) >= 16 and not line.startswith("#"):
                        markers.add(line)
        return sorted(markers)

    def oracle_commands(self, task: Task) -> list[str]:
        ht = self.harbor_task(task)
        if ht.solution is None:
            solve = ht.root / "solution" / "solve.sh"
            raise InputError(str(solve), None, "file not found (needed by --student oracle)")
        return ["bash /solution/solve.sh"]

    def score(self, task: Task, trial_dir: Path, sandbox: Sandbox, trajectory: Trajectory) -> Score:
        """Copy the tests in only now, as a fresh writable copy (their folder was empty while the student
        worked), clear whatever the student left in /logs/verifier, run the tests in the trial's own sandbox
        as Harbor does in its container, then read the reward the verifier wrote."""
        ht = self.harbor_task(task)
        verifier_dir = trial_dir / "logs" / "verifier"
        try:
            clear_folder(trial_dir / TESTS)
            clear_folder(verifier_dir)
        except OSError as e:
            return Score(reward=0.0, reason=f"could not reset /tests or /logs/verifier before the verifier: "
                         f"{e.strerror}", outcome=Outcome.VERIFIER_ERROR)
        try:
            copy_in(ht.root, "tests", trial_dir, TESTS)
        except RefusedPath as e:
            return Score(reward=0.0, reason=f"could not copy the task's tests: {refusal(e)}",
                         outcome=Outcome.VERIFIER_ERROR)
        sandbox.hand_over_writable()
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in ht.config.verifier.env.items())
        command = f"env {env} {VERIFIER_COMMAND}" if env else VERIFIER_COMMAND
        result = sandbox.execute(command, timeout_s=ht.config.verifier.timeout_sec)
        write_text_atomic(verifier_dir / "test-output.txt", result.observation() + "\n", durable=False)
        score = read_reward(verifier_dir)
        score.details.update({"verifier_exit_code": result.exit_code, "verifier_timed_out": result.timed_out})
        if score.outcome == Outcome.VERIFIER_ERROR:
            tail = result.output.strip()[-VERIFIER_TAIL:]
            ran = "timed out" if result.timed_out else f"exited {result.exit_code}"
            score.reason = f"{score.reason}; the verifier {ran}" + (f", ending: {tail}" if tail else "")
        return score
