"""`build-sft`: reviewed runs -> training rows (`messages` + `tools`) that are safe to train on.

Filters (reward, exceptions), audits (the row is what really happened), a leak scrub (nothing of K or
the reviewer), and reasoning masks for replaced turns written in the reviewer's voice. Every dropped
trial is counted by reason; nothing is ever kept "cleaned"."""

from __future__ import annotations

import multiprocessing
import os
from collections import Counter
from collections.abc import Collection
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import orjson
from pydantic import BaseModel, Field

from unscaffold.errors import InputError
from unscaffold.iojson import write_json_atomic
from unscaffold.knowledge.kfolder import K, load_k
from unscaffold.minimal_harness.tool import TOOL_NAME, system_prompt
from unscaffold.outcomes import ERROR_OUTCOMES
from unscaffold.run.folder import RunFolder, TrialFolder
from unscaffold.sft.audit import audit
from unscaffold.sft.drop_reasons import DropReason
from unscaffold.sft.scrub import REVIEWER_WORDING, Hit, Markers, build_markers, context_around
from unscaffold.specs import HarnessSpec
from unscaffold.untrusted import REFUSED

# The filters beyond the recipe's (reward 1.0, no execution exception), each a named `--audit` option: the
# drop reason it adds. Off by default, so a reward-1.0 trial that hit the turn limit is kept.
EXTRA_AUDITS: dict[str, DropReason] = {
    "final-answer": DropReason.NO_FINAL_ANSWER,  # the trial ended with a submitted final answer
    "format-errors": DropReason.FORMAT_ERROR,  # no malformed reply anywhere (else its turns are context only)
}

# Where a row's trajectory came from (its `source`), as the recipe's data-source ablation names them; the
# published chemistry pass@1 after SFT on each is in PUBLISHED_ABLATION (behaviors/compare.py).
SOURCES = ("reviewer_k", "empty_k", "gold_reviewer", "hstar", "unreviewed")

CHAT_KEYS = ("role", "content", "reasoning_content", "tool_calls", "tool_call_id", "name")
CHAT_KEY_SET = frozenset(CHAT_KEYS)
ROW_NEEDS = ("messages", "tools", "task_id", "trial_id")  # what a row copies from its trajectory


class DroppedTrial(BaseModel):
    """One trial left out: its reason and, for a leak or reviewer wording, the marker and the row around it
    (canaries shown as `<canary>`), so a person can judge the drop at a glance."""

    run: str
    trial_id: str
    reason: str
    marker: str = ""
    context: str = ""


class BuildReport(BaseModel):
    runs: list[str]
    out: str
    min_reward: float | None
    keep_all: bool
    audits: list[str] = Field(default_factory=list, description="the extra audits (--audit) that were applied")
    include_hstar: bool = False
    sources: dict[str, int] = Field(default_factory=dict, description="kept rows per source label (SOURCES)")
    trials: int = 0
    kept: int = 0
    dropped: dict[str, int] = Field(default_factory=dict, description="trials per DropReason value")
    masked_reasoning_turns: int = 0
    untrained_turns: int = Field(0, description="malformed assistant turns of kept rows (a format error, a call to a "
                                 "tool the row's harness lacks) made context only (`context_turns`)")
    replacements_kept: int = 0
    markers: dict[str, int] = Field(default_factory=dict, description="how many strings were scanned for, by reason")
    drops: list[DroppedTrial] = Field(default_factory=list, description="every trial not kept, in order, and why")


def run_source(run_dir: Path) -> str:
    """The row label of a run, from its `config.json`: `hstar` (a student under h*), `unreviewed` (no reviewer),
    `gold_reviewer` (`--reviewer-reads-gold`), `empty_k` (`--empty-k`), else `reviewer_k` (the recipe)."""
    run = RunFolder(run_dir)
    path = run.config
    if not path.is_file():
        return "reviewer_k" if run.knowledge.is_file() else "unreviewed"
    config = run.read_raw_config()  # read by key: a config.json of any version labels its rows
    if not isinstance(config, dict):
        raise InputError(str(path), None, "expected a JSON object")
    if HarnessSpec.model_validate(config.get("harness", "minimal")).kind != "minimal":
        return "hstar"
    if not config.get("reviewer"):
        return "unreviewed"
    return "gold_reviewer" if config.get("reviewer_reads_gold") else "empty_k" if config.get("empty_k") else \
        "reviewer_k"


def run_knowledge(run_dir: Path) -> K | None:
    path = RunFolder(run_dir).read_knowledge()
    return load_k(path) if path is not None else None


def chat_row(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Only the fields a chat template reads; provider state (signatures) never reaches a row."""
    return [m if m.keys() <= CHAT_KEY_SET and None not in m.values() else
            {k: m[k] for k in CHAT_KEYS if m.get(k) is not None} for m in messages]


def build_row(traj: dict[str, Any], reviews: list[dict[str, Any]], prompt: str, raw: bytes | None = None,
              *, keep_all: bool = False, audits: Collection[str] = ()) -> tuple[dict[str, Any] | None,
                                                                                  DropReason | None]:
    """A row and None, or None and the drop reason."""
    row, reason, _ = judge_row(traj, reviews, prompt, raw, keep_all=keep_all, audits=audits)
    return row, reason


def malformed_turns(traj: dict[str, Any]) -> list[int]:
    """Assistant turns the deployed model must never learn: a step with a format error, or a call the row's
    own harness could not run (another tool's name, several calls, arguments that are not an object)."""
    messages = traj["messages"]
    names = {t["function"]["name"] for t in traj.get("tools") or ()} or {TOOL_NAME}  # none recorded: h's
    out = {s["message_index"] for s in traj.get("steps", ()) if s.get("format_error")}
    for i in range(traj.get("opening_messages", 0), len(messages)):
        calls = messages[i].get("tool_calls") if messages[i]["role"] == "assistant" else None
        if calls and (len(calls) > 1 or any(c["function"]["name"] not in names
                                            or not isinstance(c["function"].get("arguments"), dict) for c in calls)):
            out.add(i)
    return sorted(out)


def judge_row(traj: dict[str, Any], reviews: list[dict[str, Any]], prompt: str, raw: bytes | None = None,
              *, keep_all: bool = False, audits: Collection[str] = (), include_hstar: bool = False,
              source: str | None = None) -> tuple[dict[str, Any] | None, DropReason | None, Hit | None]:
    """`build_row` with the reviewer wording that dropped a row. `audits`: the `EXTRA_AUDITS` to apply
    (`keep_all` applies none). A malformed turn of a kept row is context only, never a target.
    `include_hstar` (the data-source ablation) keeps a run under h* as it happened: its bank's system prompt
    and tools, whose calls are then targets (the action-space mismatch the ablation measures). `source`: the
    row's label."""
    hstar = traj.get("harness", "minimal") != "minimal"
    if hstar and not include_hstar:
        return None, DropReason.NOT_DEPLOYMENT_HARNESS, None
    strict = set() if keep_all else set(audits)
    problem = audit(traj, reviews, None if hstar else prompt, raw, require_final_answer="final-answer" in strict)
    if problem:
        return None, problem, None
    malformed = malformed_turns(traj)
    if malformed and "format-errors" in strict:
        return None, DropReason.FORMAT_ERROR, None
    messages = chat_row(traj["messages"])
    masked = []
    replaced = [s for s in traj.get("steps", []) if s.get("replaced")]
    for step in replaced:
        m = messages[step["message_index"]]
        content = m.get("content")
        found = REVIEWER_WORDING.search(content) if content else None
        if found:
            data = content.encode()
            start = len(content[:found.start()].encode())
            end = start + len(found.group().encode())
            return None, DropReason.REVIEWER_WORDING_IN_CONTENT, Hit(
                DropReason.REVIEWER_WORDING_IN_CONTENT, found.group(), context_around(data, start, end))
        if m.get("reasoning_content") and REVIEWER_WORDING.search(m["reasoning_content"]):
            masked.append(step["message_index"])
    row = {
        "messages": messages,
        "tools": traj["tools"],
        "task_id": traj["task_id"],
        "trial_id": traj["trial_id"],
        "replacements": len(replaced),
        "masked_reasoning_turns": masked,
        **({"source": source} if source else {}),
    }
    context = [i for i in range(traj.get("opening_messages", 0)) if messages[i]["role"] == "assistant"]
    if context or malformed:  # a suite's worked example and malformed turns: kept as context, never trained
        row["context_turns"] = context + malformed
    return row, None, None


ONE_READ = 1 << 30  # Linux returns at most about 2 GiB from one read


def read_if_exists(path: str) -> bytes | None:
    """A file's bytes, or None when there is none (one system call fewer than asking first). Read with
    one `read` of the size `fstat` gives (no buffered file object, no terminal check)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        data = os.read(fd, size + 1)
        if len(data) <= size < ONE_READ:  # a short read of a regular file is its end
            return data
        parts = [data]  # the file grew since `fstat`, or is larger than one read returns
        while chunk := os.read(fd, ONE_READ):
            parts.append(chunk)
        return b"".join(parts)
    finally:
        os.close(fd)


def read_reviews(path: Path | str) -> list[dict[str, Any]]:
    data = read_if_exists(str(path))
    if data is None:
        return []
    try:  # one parse for the whole log (raw newlines only end lines); line by line only to name a bad line
        return orjson.loads(b"[" + data.rstrip(b"\n").replace(b"\n", b",") + b"]")
    except orjson.JSONDecodeError:
        pass
    lines = [line for line in data.splitlines() if line.strip()]
    try:
        return orjson.loads(b"[" + b",".join(lines) + b"]")
    except orjson.JSONDecodeError:
        pass
    out = []
    for n, line in enumerate(data.splitlines(), 1):
        if line.strip():
            try:
                out.append(orjson.loads(line))
            except orjson.JSONDecodeError as e:
                raise InputError(str(path), f"line {n}", f"invalid JSON: {e}") from None
    return out


def parse_fast(raw: bytes, path: Path | str) -> Any:
    """orjson for the bulk path (10,000s of trajectories); errors still name the file."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise InputError(str(path), None, f"invalid JSON: {e}") from None


PARALLEL_FROM = 400  # trials of one run from which the work is spread over processes (their start costs)
CHUNK = 64  # trials a worker takes at a time, written to a part file of its own


class Judged(NamedTuple):
    """One trial's fate: a drop reason, or the row's JSON line and its counts."""

    reason: DropReason | None
    line: bytes = b""
    masked: int = 0
    replacements: int = 0
    hit: Hit | None = None
    skip: tuple[int, int] | None = None  # the row's worked-example opening, which the leak scan passes over
    untrained: int = 0  # malformed turns made context


@dataclass
class Tally:
    """What the report counts, for some trials."""

    trials: int = 0
    kept: int = 0
    masked: int = 0
    replacements: int = 0
    untrained: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    drops: list[DroppedTrial] = field(default_factory=list)

    def add(self, other: Tally) -> None:
        self.trials, self.kept = self.trials + other.trials, self.kept + other.kept
        self.masked, self.replacements = self.masked + other.masked, self.replacements + other.replacements
        self.untrained += other.untrained
        self.dropped.update(other.dropped)
        self.drops.extend(other.drops)


class Judge:
    """Judges trials of one run; a plain picklable object, so worker processes can run it."""

    def __init__(self, markers: Markers, prompt: str, min_reward: float, keep_all: bool, run: str = "",
                 audits: Collection[str] = (), include_hstar: bool = False, source: str | None = None) -> None:
        self.markers, self.prompt, self.min_reward, self.keep_all = markers, prompt, min_reward, keep_all
        self.audits, self.include_hstar, self.source = tuple(audits), include_hstar, source
        self.run = run

    def __call__(self, trial: str) -> Judged:
        fate = self.unscanned(trial)
        return self.scan(fate) if fate.reason is None else fate

    def scan(self, fate: Judged) -> Judged:
        """The leak scan of a kept row: exact, marker by marker (`Markers.find`)."""
        hit = self.markers.find(fate.line, skip=fate.skip)
        return Judged(DropReason(hit.reason), hit=hit) if hit else fate

    def unscanned(self, trial: str) -> Judged:
        """Everything but the leak scan, which `judge_into` runs over many rows at once."""
        result_path = os.path.join(trial, TrialFolder.RESULT)
        data = read_if_exists(result_path)
        if data is None:
            return Judged(DropReason.UNFINISHED)
        result = parse_fast(data, result_path)
        if not isinstance(result, dict):
            raise InputError(result_path, None, "expected a JSON object")
        # Never training data, whatever the reward and even with --keep-all: a trial the verifier, the
        # environment or the machinery failed, or one whose artifact was refused (a link, a special file).
        if result.get("outcome") in ERROR_OUTCOMES:
            return Judged(DropReason(result["outcome"]))
        if isinstance(result.get("details"), dict) and result["details"].get(REFUSED):
            return Judged(DropReason.REFUSED_ARTIFACT)
        if not self.keep_all:
            if result.get("exception"):
                return Judged(DropReason.EXCEPTION)
            if result.get("reward", 0.0) < self.min_reward:
                return Judged(DropReason.LOW_REWARD)
        path = os.path.join(trial, TrialFolder.TRAJECTORY)
        raw = read_if_exists(path)
        if raw is None:
            return Judged(DropReason.NO_TRAJECTORY)
        traj = parse_fast(raw, path)
        reviews_path = os.path.join(trial, TrialFolder.REVIEWS)
        try:
            row, reason, hit = judge_row(traj, read_reviews(reviews_path), self.prompt, raw, keep_all=self.keep_all,
                                         audits=self.audits, include_hstar=self.include_hstar, source=self.source)
        except (KeyError, TypeError, AttributeError, IndexError) as e:
            raise shape_error(path, traj, reviews_path, e) from None
        if row is None:
            return Judged(reason, hit=hit)
        line = orjson.dumps(row)
        opening = traj.get("opening_messages", 0)
        return Judged(None, line, len(row["masked_reasoning_turns"]), row["replacements"],
                      skip=opening_span(line, row, opening),
                      untrained=sum(1 for i in row.get("context_turns", ()) if i >= opening))


def shape_error(path: str, traj: Any, reviews_path: str, error: Exception) -> InputError:
    """A trajectory or review log the judging could not read, as one line naming the file and field. Judging
    reads plain dicts; the trajectory's model is only consulted now, to name the field, so well-formed
    trials never pay for validating it."""
    from pydantic import ValidationError

    from unscaffold.iojson import validation_error
    from unscaffold.minimal_harness.trajectory import Trajectory

    if not isinstance(traj, dict):
        return InputError(path, None, "expected a JSON object")
    for key in ROW_NEEDS:  # the model has defaults for some of them; a row has none
        if key not in traj:
            return InputError(path, key, "Field required")
    try:
        Trajectory.model_validate(traj)
    except ValidationError as e:
        return validation_error(path, e)
    what = f"missing field {error.args[0]!r}" if isinstance(error, KeyError) else f"{type(error).__name__}: {error}"
    return InputError(reviews_path, None, f"a review line is not as the harness writes it ({what})")


def opening_span(line: bytes, row: dict[str, Any], opening: int) -> tuple[int, int] | None:
    """Where a worked-example opening lies in a serialized row: the leak scrub skips it (the suite wrote that
    text, the same at deployment; K and the reviewer never reach it). A plain opening is scanned as before."""
    if not any(i < opening for i in row.get("context_turns", ())):
        return None
    head = orjson.dumps(row["messages"][:opening])[1:-1]
    start = len(b'{"messages":[')
    if line[start:start + len(head)] != head:
        return None  # not the layout this expects: scan everything
    return start, start + len(head)


SCAN_BATCH = 64  # rows whose leak scan's first pass runs in one call (the automaton is built once per call)


def judge_into(judge: Judge, trials: list[str], sink: BinaryIO) -> Tally:
    """Judge trials in order, writing the kept rows to `sink`. The leak scan's first pass covers a batch of
    rows at once (`Markers.prefilter`); only a row it flags gets the exact scan."""
    tally = Tally()
    for start in range(0, len(trials), SCAN_BATCH):
        batch = trials[start:start + SCAN_BATCH]
        fates = [judge.unscanned(trial) for trial in batch]
        flagged = iter(judge.markers.prefilter([f.line for f in fates if f.reason is None]))
        for trial, fate in zip(batch, fates, strict=True):
            tally_one(judge, trial, judge.scan(fate) if fate.reason is None and next(flagged) else fate, tally,
                      sink)
    return tally


def tally_one(judge: Judge, trial: str, fate: Judged, tally: Tally, sink: BinaryIO) -> None:
    """Count one trial's fate and write its row when kept."""
    tally.trials += 1
    if fate.reason is not None:
        tally.dropped[fate.reason.value] += 1
        hit = fate.hit
        tally.drops.append(DroppedTrial(run=judge.run, trial_id=os.path.basename(trial), reason=fate.reason.value,
                                        marker=judge.markers.redact(hit.marker) if hit else "",
                                        context=judge.markers.redact(hit.context) if hit else ""))
        return
    sink.write(fate.line + b"\n")
    tally.kept += 1
    tally.masked += fate.masked
    tally.replacements += fate.replacements
    tally.untrained += fate.untrained


def judge_part(judge: Judge, trials: list[str], part: str) -> Tally:
    """A worker's share: its rows go to a part file (rows never travel through a pipe)."""
    with open(part, "wb") as sink:
        return judge_into(judge, trials, sink)


def append_file(sink: BinaryIO, part: str) -> None:
    """Append a part file to the output inside the kernel, then remove it."""
    sink.flush()
    with open(part, "rb") as source:
        size, offset = os.fstat(source.fileno()).st_size, 0
        while offset < size:
            sent = os.sendfile(sink.fileno(), source.fileno(), offset, size - offset)
            if sent == 0:
                break
            offset += sent
    os.unlink(part)


def judge_run(judge: Judge, trials: list[str], sink: BinaryIO, pool: ProcessPoolExecutor | None, parts: str
              ) -> Tally:
    """Every trial of a run, rows in order; spread over the pool and this process when there is a pool and
    enough trials. The workers take chunks from the front; this process takes them from the back, each
    one whose future it can still cancel (so it works while the workers start), until the two meet."""
    if pool is None or len(trials) < PARALLEL_FROM:
        return judge_into(judge, trials, sink)
    chunks = [trials[i:i + CHUNK] for i in range(0, len(trials), CHUNK)]
    futures = [pool.submit(judge_part, judge, chunk, f"{parts}.{n}") for n, chunk in enumerate(chunks)]
    own: dict[int, Tally] = {}
    tally = Tally()
    try:
        for n in reversed(range(len(chunks))):
            if not futures[n].cancel():  # a worker has it, so it has every chunk before it too (taken in order)
                break
            own[n] = judge_part(judge, chunks[n], f"{parts}.{n}")
        for n, future in enumerate(futures):
            tally.add(own[n] if n in own else future.result())
            append_file(sink, f"{parts}.{n}")
    finally:
        for future in futures:
            future.cancel()
        for n, future in enumerate(futures):
            if not future.cancelled():
                future.exception()  # wait: a running worker may still be writing its part
            Path(f"{parts}.{n}").unlink(missing_ok=True)
    return tally


def pool_context(markers: Markers) -> BaseContext:
    """Workers forked from this process when it has a single thread (they start at once, importing nothing);
    otherwise from a fork server (forking a process with threads can deadlock), which imports build-sft (and
    pyarrow, the leak scan's first pass over many markers) once for all of them."""
    try:
        single = len(os.listdir("/proc/self/task")) == 1  # every thread, native ones included
    except OSError:  # no /proc: not Linux
        single = False
    if single:
        return multiprocessing.get_context("fork")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__] + ["pyarrow.compute"] * markers.needs_automaton())
    return context


def build_sft(
    run_dirs: list[Path],
    out: Path,
    *,
    min_reward: float = 1.0,
    keep_all: bool = False,
    audits: Collection[str] = (),
    include_hstar: bool = False,
    canaries: list[str] | None = None,
    workers: int | None = None,
) -> BuildReport:
    """`workers`: processes judging a large run, this one included (default: the machine's cores; 1 keeps
    everything in this one)."""
    out = Path(out)
    unknown = sorted(set(audits) - set(EXTRA_AUDITS))
    if unknown:
        raise InputError("--audit", None, f"unknown audit {unknown[0]!r}; known: {', '.join(EXTRA_AUDITS)}")
    report = BuildReport(runs=[str(r) for r in run_dirs], out=str(out), min_reward=None if keep_all else min_reward,
                         keep_all=keep_all, audits=[] if keep_all else sorted(set(audits)),
                         include_hstar=include_hstar)
    tally = Tally()
    prompt = system_prompt()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    workers = workers or len(os.sched_getaffinity(0))
    pool = None
    try:
        with open(tmp, "wb") as sink:
            for index, run_dir in enumerate(map(Path, run_dirs)):
                trials_dir = RunFolder(run_dir).trials_dir
                if not trials_dir.is_dir():
                    raise InputError(str(run_dir), None, f"not a run folder (no {RunFolder.TRIALS}/)")
                k = run_knowledge(run_dir)
                markers = build_markers([k] if k else [], list(canaries or []))
                for reason, values in markers.by_reason.items():
                    report.markers[reason] = max(report.markers.get(reason, 0), len(values))
                trials = sorted(e.path for e in os.scandir(trials_dir) if e.is_dir())
                if pool is None and workers > 1 and len(trials) >= PARALLEL_FROM:
                    pool = ProcessPoolExecutor(workers - 1, mp_context=pool_context(markers))  # this process is one
                source = run_source(run_dir)
                judge = Judge(markers, prompt, min_reward, keep_all, str(run_dir), report.audits, include_hstar,
                              source)
                before = tally.kept
                tally.add(judge_run(judge, trials, sink, pool, f"{tmp}.run{index}.part"))
                report.sources[source] = report.sources.get(source, 0) + tally.kept - before
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    report.trials, report.kept = tally.trials, tally.kept
    report.masked_reasoning_turns, report.replacements_kept = tally.masked, tally.replacements
    report.untrained_turns = tally.untrained
    report.dropped = dict(sorted(tally.dropped.items()))
    report.drops = tally.drops
    write_json_atomic(report_path(out), report.model_dump())
    return report


def report_path(out: Path) -> Path:
    """`DATA.jsonl` -> `DATA.report.json`."""
    name = out.name[: -len(".jsonl")] if out.name.endswith(".jsonl") else out.name
    return out.with_name(f"{name}.report.json")
