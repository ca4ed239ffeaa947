"""Trials as Ray tasks: each attempt is one task with declared resources, on a node whose sandbox starts.

Workers need not share a file system with the driver: the run's inputs go out once through the object
store, each finished trial's folder comes back as an archive, and the driver alone writes the run folder
(`result.json` last), so resume, events and retries are the runner's, as with local threads. A lost node
fails its attempts with an infrastructure error, which the runner retries elsewhere."""

from __future__ import annotations

import atexit
import logging
import math
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from unscaffold.benchmarks.base import Suite, Task
from unscaffold.collect import shipping
from unscaffold.collect.call_slots import RaySlot, SlotsActor
from unscaffold.collect.executor_spec import ExecutorSpec, RunStopped
from unscaffold.collect.models import RunConfig, TrialResult
from unscaffold.collect.run_setup import make_provider, probe_sandbox, select_tasks, trial_context
from unscaffold.collect.trial import RESULT, TrialContext, record_infra_failure, run_trial
from unscaffold.errors import SandboxUnavailable
from unscaffold.iojson import write_json_atomic
from unscaffold.llm.base import ModelProvider
from unscaffold.minimal_harness.trajectory import now_iso
from unscaffold.reviewer.throttle import ThrottledReviewers

NODE_LABEL = "ray.io/node-id"  # every node carries it; trials avoid the nodes whose sandbox would not start
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
            provider = make_provider(config.student, suite, tasks)
            context = trial_context(suite, config)
            for field, loaded in (("student", provider), ("reviewer", context.reviewers)):
                parts = shipping.spec_file(getattr(original, field))
                if parts and field in shipped:
                    _restore_spec(loaded, str(root / field), parts[1])
            if context.reviewers is not None:
                if slots is not None and original.reviewer_concurrency:
                    context.reviewers = ThrottledReviewers(context.reviewers, original.reviewer_concurrency,
                                                           gate=RaySlot(slots, REVIEWER_POOL))
            _STATES[key] = _WorkerState(suite, {t.id: t for t in tasks}, provider, config, context)
        return _STATES[key]


@ray.remote
def _probe(config_json: str) -> str:
    """This node's sandbox isolation, or the error that stops it from starting."""
    config = RunConfig.model_validate_json(config_json)
    shipping.CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="probe-", dir=shipping.CACHE) as tmp:
        return probe_sandbox(config.model_copy(update={"out": Path(tmp)}))


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


@ray.remote
def _attempt(key: str, config_json: str, shipped: list[str], bundle: list[Any], slots: Any, task_id: str,
             trial_id: str, attempt: int) -> tuple[dict[str, Any], bytes, str]:
    """One attempt in a scratch folder of this node; returns its result, its files and the node id."""
    state = _worker_state(key, config_json, shipped, bundle, slots)
    shipping.CACHE.mkdir(parents=True, exist_ok=True)
    _sweep_dead_scratch(shipping.CACHE)
    scratch = Path(tempfile.mkdtemp(prefix=f"trial-{os.getpid()}-", dir=shipping.CACHE))
    try:
        trial_dir = scratch / trial_id
        trial_dir.mkdir()
        result = run_trial(state.suite, state.tasks[task_id], trial_id, trial_dir, state.provider, state.config,
                           state.context, attempt=attempt)
        files = shipping.pack_folder(trial_dir, exclude=frozenset({RESULT}))
        return result.model_dump(mode="json"), files, ray.get_runtime_context().get_node_id()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


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
        self.slots = None
        if config.reviewer and config.reviewer_concurrency:
            self.slots = ray.remote(SlotsActor).options(num_cpus=0, scheduling_strategy=_near_driver()).remote(
                {REVIEWER_POOL: config.reviewer_concurrency})
        self.options: dict[str, Any] = {"num_cpus": spec.cpus, "max_retries": 0}  # retries are the runner's
        if spec.memory_bytes:
            self.options["memory"] = spec.memory_bytes
        self.excluded: set[str] = set()
        self.inflight: dict[str, Any] = {}
        self.lock = threading.Lock()
        self.stopping = False
        self._probe_nodes(config)

    def _probe_nodes(self, config: RunConfig) -> None:
        """Start the sandbox once on every node; trials avoid those where it fails, the run fails if all do."""
        refs = {node["NodeID"]: _probe.options(
            num_cpus=0, max_retries=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False),
        ).remote(self.config_json) for node in ray.nodes() if node.get("Alive")}
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

    def _submit(self, task: Task, trial_id: str, attempt: int) -> Any:
        with self.lock:
            if self.stopping:
                raise RunStopped("the run is stopping")
            options = dict(self.options)
            if self.excluded:
                options["label_selector"] = {NODE_LABEL: f"!in({','.join(sorted(self.excluded))})"}
            ref = _attempt.options(**options).remote(self.key, self.config_json, self.shipped, self.bundle,
                                                     self.slots, task.id, trial_id, attempt)
            self.inflight[trial_id] = ref
            return ref

    def run_trial(self, suite: Suite, task: Task, trial_id: str, trial_dir: Path, provider: ModelProvider,
                  config: RunConfig, context: TrialContext, attempt: int = 1) -> TrialResult:
        started = now_iso()
        ref = self._submit(task, trial_id, attempt)
        try:
            payload, files, node = ray.get(ref)
        except RayError as e:  # the worker or its node died, or the attempt could not run there
            if self.stopping:
                raise RunStopped("the run is stopping") from None
            return record_infra_failure(suite, task, trial_id, trial_dir, provider.spec, _cause(e), attempt, started)
        finally:
            with self.lock:
                self.inflight.pop(trial_id, None)
            if self.slots is not None:  # slots an attempt still holds (its node died mid-call) go back
                self.slots.release_holder.remote(ref.task_id().hex())
        result = TrialResult.model_validate(payload)
        if result.infra_error and (result.exception or "").startswith(SandboxUnavailable.__name__):
            with self.lock:
                self.excluded.add(node)
        shipping.unpack(files, trial_dir)
        write_json_atomic(trial_dir / RESULT, result)
        return result

    def stop(self) -> None:
        """Ctrl-C: cancel every attempt in flight; their trials stay unfinished and the next run resumes them."""
        with self.lock:
            self.stopping = True
            refs = list(self.inflight.values())
        for ref in refs:
            ray.cancel(ref, force=True)

    def close(self) -> None:
        if self.owned:
            ray.shutdown()
