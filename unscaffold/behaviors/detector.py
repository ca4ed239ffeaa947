"""A behaviour detector: did a trajectory show what an h* component teaches?

Detectors are declared next to the component in the bank (`detector = {...}`) and read only the
student's own actions, so they apply alike to runs under h (commands only) and under h* (where the
behaviour may also be a call of the component's tool). A detector (`DetectorSpec`, in `detector_spec.py`) is
either regular expressions over the actions (`commands`, ...) or a named deterministic predicate (`predicate`,
a suite's, found through the suite registry `unscaffold/suites.py`) that reads what the commands did: which
library call on which file, before or after which write. A bank tool's recipe run under h counts as that
tool's call, since it runs the same script."""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, Field

from unscaffold.detector_spec import DetectorSpec
from unscaffold.llm.types import assistant_calls, command_of
from unscaffold.minimal_harness.evidence import CommandEvidence
from unscaffold.minimal_harness.trajectory import Trajectory
from unscaffold.suites import evidence_predicates, predicates

Kind = Literal["evidence", "text"]  # what decided a detection: recorded evidence, or the commands' text


def student_actions(traj: Trajectory) -> list[tuple[str, str]]:
    """(tool name, text) for every call the student made: an execute's command, else name + arguments. A
    worked example in the suite's opening is not the student's."""
    from unscaffold.behaviors.program import MAX_COMMAND_CHARS

    out = []
    for call in assistant_calls(traj.messages[traj.opening_messages:]):
        command = command_of(call)
        if command is not None:  # a command past the bound is not read (it shows nothing)
            out.append(("execute", command if len(command) <= MAX_COMMAND_CHARS else ""))
        else:
            args = call.arguments
            text = json.dumps(args, sort_keys=True) if isinstance(args, dict) else str(args)
            out.append((call.name, f"{call.name} {text}"))
    return out


def detect(spec: DetectorSpec, traj: Trajectory, views: dict[int, Any] | None = None,
           evidence: list[CommandEvidence] | None = None) -> bool:
    """Every condition the spec names must hold; `tools` and `commands` together are one condition. `views`
    caches one trajectory's analysis across the detectors of one bank (they share its tool scripts)."""
    return detect_how(spec, traj, views, evidence)[0]


def detect_how(spec: DetectorSpec, traj: Trajectory, views: dict[int, Any] | None = None,
               evidence: list[CommandEvidence] | None = None) -> tuple[bool, Kind]:
    """Whether the trajectory shows the behaviour, and what decided it: `evidence` (what the commands were
    recorded doing, for a predicate with an evidence form, when every command was recorded) or `text`."""
    if spec.predicate:
        from unscaffold.behaviors.predicates import View

        if views is None:  # `views` (id of the trajectory -> its View) shares the analysis among detectors
            views = {}
        if id(traj) not in views:
            from unscaffold.behaviors.program import steps_of

            views[id(traj)] = View(steps_of(traj, spec._scripts), evidence=usable(evidence))
        view = views[id(traj)]
        if view.evidence is not None and spec.predicate in evidence_predicates():
            return _spec_holds(spec, traj, views), "evidence"
    return _spec_holds(spec, traj, views), "text"


def usable(evidence: list[CommandEvidence] | None) -> list[CommandEvidence] | None:
    """Evidence decides only where every command was recorded; else the trial is read from its text."""
    if evidence is None or any(c.recorder == "none" for c in evidence):
        return None
    return evidence


def _spec_holds(spec: DetectorSpec, traj: Trajectory, views: dict[int, Any] | None) -> bool:
    answered = traj.exit_status == "submitted" and traj.final_answer is not None
    if spec.final_answer_lacks is not None:
        if not answered or re.search(spec.final_answer_lacks, traj.final_answer or ""):
            return False
    if spec.within_turns is not None and (not answered or len(traj.steps) > spec.within_turns):
        return False
    seen = traj.messages[traj.opening_messages:]  # the opening's outputs are mocked, not what the student saw
    if not spec.tools and not spec.commands and (spec.final_answer_lacks or spec.within_turns):
        return spec.observations is None or any(
            m.role == "tool" and re.search(spec.observations, m.content) for m in seen)
    if spec.predicate:
        from unscaffold.behaviors.predicates import View
        from unscaffold.behaviors.program import steps_of

        if spec.observations and not any(m.role == "tool" and re.search(spec.observations, m.content)
                                         for m in seen):
            return False
        if views is None:
            views = {}
        if id(traj) not in views:
            views[id(traj)] = View(steps_of(traj, spec._scripts))
        view = views[id(traj)]
        evidence_forms = evidence_predicates()
        if view.evidence is not None and spec.predicate in evidence_forms:
            return evidence_forms[spec.predicate](view, spec.params)
        return predicates()[spec.predicate](view, spec.params)
    actions = student_actions(traj)
    if spec.after_last:
        last = max((i for i, (_, text) in enumerate(actions) if re.search(spec.after_last, text)), default=-1)
        if last >= 0:  # what the same command does after its last write counts too (`> f && cat f`)
            name, text = actions[last]
            tail = text[[m.end() for m in re.finditer(spec.after_last, text)][-1] :]
            actions = [(name, tail)] + actions[last + 1 :]
    if spec.observations and not any(m.role == "tool" and re.search(spec.observations, m.content) for m in seen):
        return False
    if not spec.ordered and any(name in spec.tools for name, _ in actions):
        return True
    if not spec.commands:
        return False
    if spec.ordered:  # a tool call takes the place of the first step, and must come in order like it
        position = 0
        for k, pattern in enumerate(spec.commands):
            position = next((i + 1 for i in range(position, len(actions)) if re.search(pattern, actions[i][1]) or
                             k == 0 and actions[i][0] in spec.tools), -1)
            if position < 0:
                return False
        return True
    return all(any(re.search(p, text) for _, text in actions) for p in spec.commands)


class TrialReading(BaseModel):
    """Every detector of a bank on one trajectory: what it shows, what decided each, and what could not be read."""

    shows: dict[str, bool]
    kinds: dict[str, Kind]
    notes: list[str] = Field(default_factory=list)


def read_trial(detectors: dict[str, DetectorSpec], traj: Trajectory, evidence: list[CommandEvidence] | None = None,
               seconds: float | None = None) -> TrialReading:
    """Run every detector on one trajectory within a time bound. A trajectory the analysis cannot finish (past
    the bound, or too deep for the stack) shows no behaviour not yet decided, and says so in `notes`."""
    from unscaffold.behaviors.program import TRIAL_SECONDS, AnalysisTimeout, time_bound

    shows: dict[str, bool] = dict.fromkeys(detectors, False)
    recorded = usable(evidence) is not None
    kinds: dict[str, Kind] = {c: "evidence" if recorded and s.predicate in evidence_predicates() else "text"
                              for c, s in detectors.items()}
    notes: list[str] = []
    views: dict[int, Any] = {}
    try:
        with time_bound(TRIAL_SECONDS if seconds is None else seconds):
            for component, spec in detectors.items():
                shows[component], kinds[component] = detect_how(spec, traj, views, evidence)
    except (AnalysisTimeout, RecursionError, MemoryError) as e:
        notes.append(f"not analysed to the end ({type(e).__name__}: {e}); the behaviours not yet decided count as "
                     "not shown")
    for view in views.values():
        notes += view.notes
    return TrialReading(shows=shows, kinds=kinds, notes=list(dict.fromkeys(notes)))
