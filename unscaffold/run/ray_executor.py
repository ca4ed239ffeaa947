"""Trials on a Ray cluster: one long-lived runner actor per node runs that node's share of the trials in
threads, as the local executor does, its suite, student and reviewers loaded once.

Each runner declares the resources of the trials it holds (`cpus` and `memory` per trial, times its slots),
so a node takes as many trials as it has room for. Workers need not share a file system with the driver:
the run's inputs go out once through the object store, each finished trial's folder comes back as an
archive, and the driver alone writes the run folder (`result.json` last), so resume, events and retries
are the runner's, as with local threads. A lost node fails its attempts with an infrastructure error,
which the runner retries on the nodes that are left."""

from __future__ import annotations

import atexit
import contextlib
import logging
import math
import os
import queue
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import RayActorError, RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from unscaffold.benchmarks.base import Suite, Task
from unscaffold.errors import SandboxUnavailable
from unscaffold.llm.base import ModelProvider
from unscaffold.minimal_harness.trajectory import now_iso
from unscaffold.reviewer.throttle import ThrottledReviewers
from unscaffold.run import shipping
from unscaffold.run.call_slots import RaySlot, SlotsActor
from unscaffold.run.executor_spec import ExecutorSpec, RunStopped
from unscaffold.run.folder import TrialFolder
from unscaffold.run.models import RunConfig, TrialResult
from unscaffold.run.setup import make_provider, probe_sandbox, select_tasks, trial_context
from unscaffold.run.trial import TrialContext, attempt_trial, record_infra_failure

PROBE_TIMEOUT_S = 300.0
REVIEWER_POOL = "reviewer"


def _cause(error: BaseException) -> str:
    """One line for a Ray error: the original exception where Ray kept it."""
    cause = getattr(error, "cause", None) or error
    text = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {text[0] if text else ''}"[:500]


# ---- on the workers -----------------------------------------------------------------------------------------


@dataclass
class _WorkerState:
    """What a worker process loads once per run: suite, tasks, student, reviewers, K."""

    suite: Suite
    tasks: dict[str, Task]
    provider: ModelProvider
    config: RunConfig
    context: TrialContext


def _restore_spec(loaded: Any, shipped: str, original: str) -> None:
    """Records name a model by its spec: a provider or reviewer loaded from a shipped copy shows the driver's
    spec, so trajectories and review logs read exactly as a local run's (wrappers are followed by `inner`)."""
    while loaded is not None:
        if isinstance(getattr(loaded, "spec", None), str):
            loaded.spec = loaded.spec.replace(shipped, original)
        loaded = getattr(loaded, "inner", None)


_STATES: dict[str, _WorkerState] = {}
_STATES_LOCK = threading.Lock()


def _worker_state(key: str, config_json: str, shipped: list[str], bundle: list[Any], slots: Any) -> _WorkerState:
    from unscaffold.benchmarks import load_suite

    with _STATES_LOCK:
        if key not in _STATES:
            root = shipping.unpack_cached(ray.get(bundle[0]), key.partition("-")[0])
            scratch = Path(tempfile.mkdtemp(prefix="worker-", dir=shipping.CACHE))
            original = RunConfig.model_validate_json(config_json)
            config = shipping.rebased(original, root, set(shipped))
            config = config.model_copy(update={"out": scratch, "reviewer_concurrency": None})
            suite = load_suite(config.suite, config.data, config.split_file)
            atexit.register(suite.close)  # the worker keeps its suite for every trial it runs, then exits
            tasks = select_tasks(suite, config)
            provider = make_provider(config.student, suite, tasks, config.sampling)
            context = trial_context(suite, config)
            for field, loaded in (("student", provider), ("reviewer", context.reviewers)):
                path = shipping.spec_file(getattr(original, field))
                if path and field in shipped:
                    _restore_spec(loaded, str(root / field), path)
            if context.reviewers is not None:
                if slots is not None and original.reviewer_concurrency:
                    context.reviewers = ThrottledReviewers(context.reviewers, original.reviewer_concurrency,
                                                           gate=RaySlot(slots, REVIEWER_POOL))
            _STATES[key] = _WorkerState(suite, {t.id: t for t in tasks}, provider, config, context)
        return _STATES[key]


def _sweep_dead_scratch(cache: Path) -> None:
    """Scratch folders of workers that died mid-trial (a node killed): their mounts, then the folders."""
    from unscaffold.minimal_harness.sandbox.disk import unmount_below

    for folder in cache.glob("trial-*-*"):
        try:
            os.kill(int(folder.name.split("-")[1]), 0)
            continue  # its worker still runs
        except ProcessLookupError:
            pass
        except (ValueError, PermissionError):
            continue
        unmount_below(folder)
        shutil.rmtree(folder, ignore_errors=True)


def _run_attempt(state: _WorkerState, task_id: str, trial_id: str, attempt: int
                 ) -> tuple[dict[str, Any], bytes, str, bool]:
    """One attempt in a scratch folder of this node; returns its result, its files, the node id and whether
    the node's sandbox would not start (decided here by the exception's type, which the result only names)."""
    shipping.CACHE.mkdir(parents=True, exist_ok=True)
    _sweep_dead_scratch(shipping.CACHE)
    scratch = Path(tempfile.mkdtemp(prefix=f"trial-{os.getpid()}-", dir=shipping.CACHE))
    try:
        trial_dir = scratch / trial_id
        trial_dir.mkdir()
        done = attempt_trial(state.suite, state.tasks[task_id], trial_id, trial_dir, state.provider, state.config,
                             state.context, attempt=attempt)
        files = shipping.pack_folder(trial_dir, exclude=frozenset({TrialFolder.RESULT}))
        return (done.result.model_dump(mode="json"), files, ray.get_runtime_context().get_node_id(),
                done.sandbox_failed)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


class TrialRunner:
    """A node's share of the run: its trials run in this process's threads (`max_concurrency` = its slots),
    so a node starts one worker process per run instead of one per trial in flight."""

    def __init__(self, key: str, config_json: str, shipped: list[str], bundle: list[Any], slots: Any) -> None:
        self.args = (key, config_json, shipped, bundle, slots)
        self.state = _worker_state(*self.args)

    def probe(self) -> str:
        """This node's sandbox isolation, or the error that stops it from starting."""
        shipping.CACHE.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="probe-", dir=shipping.CACHE) as tmp:
            return probe_sandbox(self.state.config.model_copy(update={"out": Path(tmp)}))

    def attempt(self, task_id: str, trial_id: str, attempt: int) -> tuple[dict[str, Any], bytes, str, bool]:
        return _run_attempt(self.state, task_id, trial_id, attempt)


def plan_runners(nodes: list[dict[str, Any]], concurrency: int, cpus: float, memory: int | None
                 ) -> list[tuple[str, int]]:
    """(node id, slots) per runner: slots dealt to the nodes in turn, each node taking as many trials as its
    CPUs and memory hold, until the run's concurrency is covered (or the cluster is full)."""
    room = {}
    for node in nodes:
        total = node.get("Resources", {})
        fits = [int((total.get("CPU", 0) + 1e-9) // cpus)] if cpus > 0 else []
        if memory:
            fits.append(int(total.get("memory", 0) // memory))
        room[node["NodeID"]] = min(fits) if fits else concurrency
    slots = dict.fromkeys(room, 0)
    left = concurrency
    while left > 0 and any(slots[n] < room[n] for n in room):
        for node in room:
            if left > 0 and slots[node] < room[node]:
                slots[node] += 1
                left -= 1
    return [(node, n) for node, n in slots.items() if n > 0]


# ---- on the driver -------------------------------------------------------------------------------------------


def _near_driver() -> Any:
    """The driver's node when it has one (the slot actor then lives as long as the run); through Ray Client
    the driver is on no node and Ray places the actor."""
    try:
        return NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=True)
    except Exception:  # Ray Client: no node of its own
        return "DEFAULT"


class RayExecutor:
    """`--executor ray[:ADDRESS]`: joins the cluster (or starts a local instance sized for --concurrency)."""

    def __init__(self, config: RunConfig, spec: ExecutorSpec) -> None:
        self.owned = not ray.is_initialized()
        if self.owned:
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
            if spec.address:
                ray.init(address=spec.address, logging_level=logging.WARNING)
            else:
                cpus = max(os.cpu_count() or 1, math.ceil(config.concurrency * spec.cpus))
                ray.init(address="local", num_cpus=cpus, include_dashboard=False, logging_level=logging.WARNING)
        try:
            self._start(config, spec)
        except BaseException:  # a cluster without a usable node: leave no Ray instance of ours behind
            self.close()
            raise

    def _start(self, config: RunConfig, spec: ExecutorSpec) -> None:
        files = shipping.inputs(config)
        archive = shipping.pack(files)
        self.config_json = config.model_dump_json()
        same_run = config.model_dump_json(exclude={"out"}).encode()  # workers keep what they loaded across runs
        self.key = f"{shipping.digest(archive)}-{shipping.digest(same_run)}"
        self.shipped = sorted(files)
        self.bundle = [ray.put(archive)]  # in a list: workers fetch it only when they first load the run
        self.slots: Any = None  # a SlotsActor handle: ray types an actor's methods without their `.remote`
        if config.reviewer and config.reviewer_concurrency:
            self.slots = ray.remote(SlotsActor).options(num_cpus=0, scheduling_strategy=_near_driver()).remote(
                {REVIEWER_POOL: config.reviewer_concurrency})
        self.excluded: set[str] = set()
        self.lock = threading.Lock()
        self.stopping = False
        self.runners: list[Any] = []
        self.runner_nodes: list[str] = []
        self.busy: list[int] = []  # attempts in flight per runner
        self.retired: set[int] = set()  # runners that take no more attempts (node lost or its sandbox broken)
        self.free: queue.SimpleQueue[int] = queue.SimpleQueue()  # one entry per free slot: its runner's index
        self.plan = plan_runners([n for n in ray.nodes() if n.get("Alive")], config.concurrency, spec.cpus,
                                 spec.memory_bytes)
        for node, slots in self.plan:
            options: dict[str, Any] = {"num_cpus": spec.cpus * slots, "max_concurrency": slots, "max_restarts": 0,
                                       "scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=False)}
            if spec.memory_bytes:
                options["memory"] = spec.memory_bytes * slots
            self.runners.append(ray.remote(TrialRunner).options(**options).remote(
                self.key, self.config_json, self.shipped, self.bundle, self.slots))
            self.runner_nodes.append(node)
            self.busy.append(0)
        if not self.runners:
            raise SandboxUnavailable("no node of the Ray cluster has room for a trial "
                                     f"({spec.cpus} CPUs{f', {spec.memory_bytes} bytes' if spec.memory_bytes else ''})")
        self._probe_nodes(config)
        for index, (node, slots) in enumerate(self.plan):
            if node in self.excluded:  # its sandbox does not start: the runner goes, its CPUs with it
                self.retired.add(index)
                with contextlib.suppress(RayError, ValueError):
                    ray.kill(self.runners[index])
            else:
                for _ in range(slots):
                    self.free.put(index)

    def _probe_nodes(self, config: RunConfig) -> None:
        """Start the sandbox once in every runner (as it starts); trials avoid the nodes where it fails, the run
        fails if all do."""
        refs = {node: runner.probe.remote() for node, runner in zip(self.runner_nodes, self.runners, strict=True)}
        problems: dict[str, str] = {}
        for node, ref in refs.items():
            try:
                ray.get(ref, timeout=PROBE_TIMEOUT_S)
            except (RayError, SandboxUnavailable) as e:
                problems[node] = _cause(e)
        if problems and len(problems) == len(refs):
            raise SandboxUnavailable(f"no node of the Ray cluster can start the {config.sandbox.kind!r} sandbox: "
                                     f"{next(iter(problems.values()))}")
        self.excluded = set(problems)

    def _take(self) -> int | None:
        """A free slot's runner (waiting for one), or None when no runner is left."""
        while True:
            index = self.free.get()
            with self.lock:
                if self.stopping:
                    self.free.put(index)
                    raise RunStopped("the run is stopping")
                if index < 0:  # every runner is gone: wake the next waiter too
                    self.free.put(index)
                    return None
                if index in self.retired:
                    continue  # the slot goes with its runner
                self.busy[index] += 1
                return index

    def _give_back(self, index: int, retire: bool) -> None:
        with self.lock:
            self.busy[index] -= 1
            if retire and index not in self.retired:
                self.retired.add(index)
                if len(self.retired) == len(self.runners):
                    self.free.put(-1)
            if index not in self.retired:
                self.free.put(index)
            elif self.busy[index] == 0:  # its last attempt ended: its CPUs go back to the cluster
                with contextlib.suppress(RayError, ValueError):
                    ray.kill(self.runners[index])

    def run_trial(self, suite: Suite, task: Task, trial_id: str, trial_dir: Path, provider: ModelProvider,
                  config: RunConfig, context: TrialContext, attempt: int = 1) -> TrialResult:
        started = now_iso()
        index = self._take()
        if index is None:
            return record_infra_failure(suite, task, trial_id, trial_dir, provider.spec,
                                        "no Ray node is left to run trials", attempt, started)
        ref, lost = None, False
        try:
            ref = self.runners[index].attempt.remote(task.id, trial_id, attempt)
            payload, files, node, sandbox_failed = ray.get(ref)
        except RayError as e:  # the runner or its node died, or the attempt failed there
            lost = isinstance(e, RayActorError)
            if self.stopping:
                raise RunStopped("the run is stopping") from None
            return record_infra_failure(suite, task, trial_id, trial_dir, provider.spec, _cause(e), attempt, started)
        finally:
            if self.slots is not None and ref is not None:  # slots an attempt still holds (node died mid-call)
                self.slots.release_holder.remote(ref.task_id().hex())
            self._give_back(index, retire=lost)  # a runner that died takes no more attempts
        result = TrialResult.model_validate(payload)
        if sandbox_failed:
            with self.lock:
                self.excluded.add(node)
            self._retire_node(node)
        shipping.unpack(files, trial_dir)
        TrialFolder(trial_dir).write_result(result)
        return result

    def _retire_node(self, node: str) -> None:
        """No more attempts on a node whose sandbox stopped starting; its runner ends with its last one."""
        for index, where in enumerate(self.runner_nodes):
            if where == node:
                with self.lock:
                    self.busy[index] += 1
                self._give_back(index, True)

    def stop(self) -> None:
        """Ctrl-C: end every attempt in flight (their runners go); their trials stay unfinished and the next
        run resumes them."""
        with self.lock:
            self.stopping = True
            self.free.put(-1)
        for runner in self.runners:
            with contextlib.suppress(RayError, ValueError):
                ray.kill(runner)

    def close(self) -> None:
        for runner in getattr(self, "runners", ()):  # the CPUs they hold go back to the cluster now
            with contextlib.suppress(RayError, ValueError):
                ray.kill(runner)
        if self.owned:
            ray.shutdown()
