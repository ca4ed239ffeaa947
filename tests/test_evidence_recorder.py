"""The evidence recorder: real commands run in the local sandbox on built-in tasks, and what each recorded.

Events are compared as tuples of the fields a detector reads. With a C compiler at hand (the LD_PRELOAD
library builds) the programs a shell runs and the files they open are recorded too; without one, only the
Python recorder's events and the command's own argv are, and the tests that need the library skip."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import call, final, needs_bwrap
from unscaffold.benchmarks import load_suite
from unscaffold.minimal_harness.evidence import MAX_EVENTS_PER_COMMAND, CommandEvidence, read_evidence
from unscaffold.minimal_harness.recorder import EvidenceRecorder, append_evidence, preload
from unscaffold.minimal_harness.recorder.site_hook import _mode
from unscaffold.minimal_harness.sandbox import open_sandbox
from unscaffold.minimal_harness.sandbox.base import Sandbox, SandboxKind
from unscaffold.minimal_harness.sandbox.result import ExecResult
from unscaffold.run.folder import TrialFolder
from unscaffold.run.models import RunConfig
from unscaffold.run.runner import run

PRELOAD = preload.library() is not None
needs_preload = pytest.mark.skipif(not PRELOAD, reason="no C compiler: the LD_PRELOAD recorder is not built")
WRITE = "python -c \"open('answer.txt','w').write('CCO')\""


@contextlib.contextmanager
def trial(suite_name: str, tmp_path: Path, record: bool = True, kind: SandboxKind = "local"
          ) -> Iterator[tuple[Sandbox, EvidenceRecorder | None]]:
    """A sandbox on the suite's first task, prepared as a trial prepares it (services too)."""
    suite = load_suite(suite_name)
    task = suite.tasks()[0]
    trial_dir = tmp_path / ("recorded" if record else "plain")
    trial_dir.mkdir(parents=True)
    config = suite.prepare(task, trial_dir, kind)
    config.timeout_s = 60
    with contextlib.ExitStack() as stack:
        stack.enter_context(suite.services(task, trial_dir))
        recorder = EvidenceRecorder.attach(config) if record else None
        if recorder is not None:
            stack.callback(recorder.close)
        sandbox = open_sandbox(config)
        stack.callback(sandbox.close)
        yield sandbox, recorder


def record(suite_name: str, commands: list[str], tmp_path: Path, kind: SandboxKind = "local"
           ) -> list[CommandEvidence]:
    out = []
    with trial(suite_name, tmp_path, kind=kind) as (sandbox, recorder):
        assert recorder is not None
        for step, command in enumerate(commands):
            recorder.begin()
            out.append(recorder.collect(step, 2 + 2 * step, command, sandbox.execute(command)))
    return out


def shape(evidence: CommandEvidence, kinds: tuple[str, ...] = ("open", "written", "exec", "call", "exit")
          ) -> list[tuple[Any, ...]]:
    """What a detector reads of each event, in order (the command's own argv, seq 0, left out)."""
    out: list[tuple[Any, ...]] = []
    for event in evidence.events[1:]:
        if event.kind not in kinds:
            continue
        if event.kind == "open":
            out.append(("open", event.program, event.path, event.mode))
        elif event.kind == "written":
            out.append(("written", event.path, event.content))
        elif event.kind == "exec":
            out.append(("exec", event.program, tuple(event.argv)))
        elif event.kind == "call":
            out.append(("call", event.name, tuple(event.args), event.keywords, event.ok, event.result, event.error))
        else:
            out.append(("exit", event.program, event.code, event.exception))
    return out


def by_shell(argv: tuple[str, ...]) -> list[tuple[Any, ...]]:
    """The exec record the shell leaves of a program it runs, where the preload library records it."""
    return [("exec", "bash", argv)] if PRELOAD else []


@needs_bwrap
def test_a_python_write_of_the_answer_gives_its_written_content(tmp_path: Path) -> None:
    [evidence] = record("retrosynthesis", [WRITE], tmp_path)
    assert evidence.exit_code == 0 and not evidence.timed_out and not evidence.truncated
    assert evidence.recorder == ("python-audit+ldpreload" if PRELOAD else "python-audit")
    assert evidence.events[0].model_dump() == {"seq": 0, "pid": 0, "program": "", "kind": "exec",
                                               "argv": ["bash", "-c", WRITE]}
    assert shape(evidence) == [
        *by_shell(("python", "-c", "open('answer.txt','w').write('CCO')")),
        ("open", "python", "answer.txt", "w"),
        ("written", "answer.txt", "CCO"),
        ("exit", "python", 0, None),
    ]
    written = next(e for e in evidence.events if e.kind == "written")
    assert (written.size, written.sha256) == (3, hashlib.sha256(b"CCO").hexdigest())
    assert [e.seq for e in evidence.events] == list(range(len(evidence.events)))


@needs_bwrap
def test_a_heredoc_program_reads_the_answer_and_parses_it_with_rdkit(tmp_path: Path) -> None:
    check = "python - <<'EOF'\nfrom rdkit import Chem\nm = Chem.MolFromSmiles(open('answer.txt').read())\n" \
            "print(m.GetNumAtoms())\nEOF"
    _, evidence = record("retrosynthesis", [WRITE, check], tmp_path)
    assert evidence.exit_code == 0
    assert shape(evidence) == [
        *by_shell(("python", "-")),
        ("open", "python", "answer.txt", "r"),
        ("call", "rdkit.Chem.MolFromSmiles", ("CCO",), {}, True, "<rdkit.Chem.rdchem.Mol>", None),
        ("exit", "python", 0, None),
    ]


@needs_bwrap
def test_a_crashing_script_records_its_exit_status_and_the_call_that_raised(tmp_path: Path) -> None:
    crash = "python -c 'import openpyxl; openpyxl.load_workbook(\"missing.xlsx\")'"
    [evidence] = record("spreadsheet", [crash], tmp_path)
    error = "FileNotFoundError: [Errno 2] No such file or directory: 'missing.xlsx'"
    assert evidence.exit_code == 1
    assert shape(evidence, ("call", "exit")) == [
        ("call", "openpyxl.load_workbook", ("missing.xlsx",), {}, False, None, error),
        ("exit", "python", 1, error),
    ]


@needs_bwrap
def test_every_spelling_of_a_call_is_recorded(tmp_path: Path) -> None:
    program = ("from rdkit.Chem import AllChem, MolFromSmiles as parse\nfrom rdkit import Chem\n"
               "from rdkit.Chem.rdmolfiles import MolFromSmiles\nimport rdkit.Chem as C\n"
               "print(list(map(Chem.MolFromSmiles, ['C', 'CX'])))\nparse('CC')\nAllChem.MolFromSmiles('CCC')\n"
               "MolFromSmiles('CCCC')\ngetattr(C, 'MolFromSmiles')('N')\nC.CanonSmiles('OCC')\n")
    [evidence] = record("retrosynthesis", [f"python - <<'EOF'\n{program}EOF"], tmp_path)
    mol = "<rdkit.Chem.rdchem.Mol>"
    assert shape(evidence, ("call",)) == [
        ("call", "rdkit.Chem.MolFromSmiles", ("C",), {}, True, mol, None),
        ("call", "rdkit.Chem.MolFromSmiles", ("CX",), {}, True, None, None),
        ("call", "rdkit.Chem.MolFromSmiles", ("CC",), {}, True, mol, None),
        ("call", "rdkit.Chem.MolFromSmiles", ("CCC",), {}, True, mol, None),
        ("call", "rdkit.Chem.MolFromSmiles", ("CCCC",), {}, True, mol, None),
        ("call", "rdkit.Chem.MolFromSmiles", ("N",), {}, True, mol, None),
        ("call", "rdkit.Chem.CanonSmiles", ("OCC",), {}, True, "CCO", None),  # its own inner calls are not
    ]


@needs_bwrap
@needs_preload
def test_a_shell_program_gives_an_exec_record_and_its_opens(tmp_path: Path) -> None:
    _, evidence = record("retrosynthesis", [WRITE, "cat answer.txt && echo CC > answer.txt"], tmp_path)
    assert shape(evidence) == [
        ("exec", "bash", ("cat", "answer.txt")),
        ("open", "cat", "answer.txt", "r"),
        ("open", "bash", "answer.txt", "w"),
        ("written", "answer.txt", "CC\n"),  # added by the harness: the file's content after the command
    ]


@needs_bwrap
@needs_preload
def test_a_shell_write_then_a_python_read_keeps_their_order(tmp_path: Path) -> None:
    command = ("echo CCN > answer.txt; "
               "python -c \"from rdkit import Chem; Chem.MolFromSmiles(open('answer.txt').read())\"")
    [evidence] = record("retrosynthesis", [command], tmp_path)
    assert shape(evidence, ("open", "written", "call")) == [
        ("open", "bash", "answer.txt", "w"),
        ("written", "answer.txt", "CCN\n"),
        ("open", "python", "answer.txt", "r"),
        ("call", "rdkit.Chem.MolFromSmiles", ("CCN\n",), {}, True, "<rdkit.Chem.rdchem.Mol>", None),
    ]


@needs_bwrap
def test_an_app_world_call_is_recorded_with_its_arguments_and_outcome(tmp_path: Path) -> None:
    program = ("from apis import apis\napis.api_docs.show_api_doc(app_name='contacts', api_name='login')\n"
               "try:\n    apis.contacts.show_contacts(access_token='x', page_index=1)\nexcept Exception:\n    pass\n")
    [evidence] = record("appworld_lite", [f"python - <<'EOF'\n{program}EOF"], tmp_path)
    calls = [e for e in evidence.events if e.kind == "call"]
    assert [(c.name, c.args, c.keywords, c.ok) for c in calls] == [
        ("appworld.api_docs.show_api_doc", [], {"app_name": "contacts", "api_name": "login"}, True),
        ("appworld.contacts.show_contacts", [], {"access_token": "***", "page_index": 1}, False),
    ]
    assert isinstance(calls[0].result, dict) and calls[1].error is not None
    assert calls[1].error.startswith("ApiError: ")


@needs_bwrap
def test_a_workbook_load_and_save_are_recorded_with_the_file(tmp_path: Path) -> None:
    program = ("import openpyxl\nwb = openpyxl.Workbook()\nwb.active['A1'] = 3\nwb.save('out.xlsx')\n"
               "print(openpyxl.load_workbook('out.xlsx').active['A1'].value)\n")
    [evidence] = record("spreadsheet", [f"python - <<'EOF'\n{program}EOF"], tmp_path)
    assert [(e.name, e.args, e.ok) for e in evidence.events if e.kind == "call"] == [
        ("openpyxl.Workbook.save", ["out.xlsx"], True),
        ("openpyxl.load_workbook", ["out.xlsx"], True),
    ]
    kinds = [(e.kind, getattr(e, "path", None)) for e in evidence.events if e.kind in ("written", "call")]
    assert kinds == [("written", "out.xlsx"), ("call", None), ("call", None)]  # the save's file, once, before it


@needs_bwrap
def test_a_process_over_the_event_cap_is_cut_and_marked(tmp_path: Path) -> None:
    loop = (f"python -c 'from rdkit import Chem\nfor _ in range({MAX_EVENTS_PER_COMMAND + 10}): "
            "Chem.MolFromSmiles(\"C\")'")
    [evidence] = record("retrosynthesis", [loop], tmp_path)
    assert evidence.truncated and len(evidence.events) == MAX_EVENTS_PER_COMMAND
    assert evidence.exit_code == 0


@needs_bwrap
def test_a_timed_out_command_keeps_what_it_did_before_it_was_killed(tmp_path: Path) -> None:
    command = "python -c \"f = open('answer.txt', 'w'); f.write('CCO'); f.flush(); import time; time.sleep(60)\""
    with trial("retrosynthesis", tmp_path) as (sandbox, recorder):
        assert recorder is not None
        recorder.begin()
        evidence = recorder.collect(0, 2, command, sandbox.execute(command, timeout_s=3))
    assert (evidence.exit_code, evidence.timed_out) == (124, True)
    # killed: no exit line, and the file's content is the harness's reading after the command
    assert shape(evidence, ("open", "written", "exit")) == [("open", "python", "answer.txt", "w"),
                                                            ("written", "answer.txt", "CCO")]


@needs_bwrap
def test_output_is_byte_identical_with_and_without_the_recorder(tmp_path: Path) -> None:
    commands = [
        WRITE,
        "python - <<'EOF'\nimport sys, warnings\nfrom rdkit import Chem\nprint(sys.path[1:])\n"
        "warnings.warn('w', stacklevel=1)\nprint(Chem.MolFromSmiles('CX'))\nChem.MolFromSmiles(None)\nEOF",
        "cat answer.txt; ls -a; echo $PATH; python -c 'import sys; sys.exit(3)'",
        "python -c 'import openpyxl; openpyxl.load_workbook(\"nope.xlsx\")'",
    ]
    outputs = {}
    for recorded in (True, False):
        with trial("retrosynthesis", tmp_path, record=recorded) as (sandbox, _):
            # RDKit stamps its log lines with the time of day: the one part that may differ
            outputs[recorded] = [re.sub(r"\[\d\d:\d\d:\d\d\]", "[time]", sandbox.execute(c).observation())
                                 for c in commands]
    assert outputs[True] == outputs[False]
    assert outputs[True][2].endswith("[exit_code=3]")


def test_open_modes_follow_the_schema() -> None:
    cases = {("r", None): "r", ("rb", None): "r", ("r+", None): "rw", ("w", None): "w", ("wb+", None): "w",
             ("a", None): "a", ("x", None): "x", (None, os.O_RDONLY): "r", (None, os.O_WRONLY | os.O_CREAT): "rw",
             (None, os.O_WRONLY | os.O_CREAT | os.O_TRUNC): "w", (None, os.O_RDWR | os.O_APPEND): "a",
             (None, os.O_RDWR | os.O_CREAT | os.O_EXCL): "x"}
    assert {key: _mode(*key) for key in cases} == cases


def test_recorded_values_are_bounded_and_keep_their_shape() -> None:
    from unscaffold.minimal_harness.evidence import MAX_VALUE_CHARS
    from unscaffold.minimal_harness.recorder.site_hook import _Recorder

    values = _Recorder("/nonexistent", "/ws", MAX_EVENTS_PER_COMMAND, MAX_VALUE_CHARS, 100)
    page = [{"title": "x" * 100, "song_id": i} for i in range(40)]
    assert values.value(page[:5]) == page[:5]  # a page of a list API, whole
    assert values.value(page) == ["<dict>"] * 40  # too long whole: its length and item types
    assert values.value({"text": "y" * 3000, "ids": [1, 2]}) == {"text": "y" * 20, "ids": "<list>"}
    assert values.value("z" * 3000) == "z" * MAX_VALUE_CHARS
    assert values.value([float("nan"), b"ab", Path("a/b"), ({1},)]) == ["nan", "ab", "a/b", [[1]]]
    assert values.value(object()) == "<object>"


def test_collect_orders_lines_of_all_processes_and_drops_forged_ones(tmp_path: Path) -> None:
    from unscaffold.minimal_harness.sandbox.base import SandboxConfig

    config = SandboxConfig(kind="none", workspace=tmp_path / "ws")
    (tmp_path / "ws").mkdir()
    recorder = EvidenceRecorder.attach(config)
    try:
        lines = {"1-a.jsonl": [{"kind": "exec", "argv": ["ls"], "t": 30, "pid": 1, "program": "bash"},
                               {"kind": "open", "path": "x", "mode": "bogus", "t": 31, "pid": 1}],
                 "2-b.jsonl": [{"kind": "open", "path": "answer.txt", "mode": "r", "t": 20, "pid": 2,
                                "program": "python"}, {"kind": "dropped", "count": 4, "t": 40, "pid": 2}]}
        for name, records in lines.items():
            (recorder.out / name).write_text("".join(json.dumps(r) + "\n" for r in records) + "{torn")
        forged = tmp_path / "host.jsonl"  # a host file of event lines, linked into the spool: not read
        forged.write_text(json.dumps({"kind": "exec", "argv": ["host"], "t": 1, "pid": 9}) + "\n")
        (recorder.out / "0-link.jsonl").symlink_to(forged)
        os.mkfifo(recorder.out / "0-fifo.jsonl")
        evidence = recorder.collect(3, 8, "x", ExecResult(output="", exit_code=2))
    finally:
        recorder.close()
    assert [(e.seq, e.kind, e.pid) for e in evidence.events] == [(0, "exec", 0), (1, "open", 2), (2, "exec", 1)]
    assert (evidence.step, evidence.message_index, evidence.exit_code, evidence.truncated) == (3, 8, 2, True)
    assert config.env["PYTHONPATH"] == str(recorder.folder / "lib")


def test_the_harness_reads_no_file_through_a_link_or_outside_the_workspace(tmp_path: Path) -> None:
    from unscaffold.minimal_harness.sandbox.base import SandboxConfig

    (tmp_path / "ws").mkdir()
    (tmp_path / "secret").write_text("host secret")
    (tmp_path / "ws" / "answer.txt").symlink_to(tmp_path / "secret")
    (tmp_path / "ws" / "plain.txt").write_text("CCO")
    recorder = EvidenceRecorder.attach(SandboxConfig(kind="none", workspace=tmp_path / "ws"))
    try:
        lines = [{"kind": "open", "path": path, "mode": "w", "inside_workspace": True, "t": t, "pid": 7,
                  "program": "bash"} for t, path in enumerate(["answer.txt", "../secret", "plain.txt"])]
        (recorder.out / "7-a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
        evidence = recorder.collect(0, 2, "x", ExecResult(output="", exit_code=0))
    finally:
        recorder.close()
    assert [(e.kind, e.path, getattr(e, "content", None)) for e in evidence.events[1:]] == [
        ("open", "answer.txt", None), ("open", "../secret", None), ("open", "plain.txt", None),
        ("written", "plain.txt", "CCO")]


def test_the_unisolated_sandbox_records_as_the_local_one_does(tmp_path: Path) -> None:
    check = "python -c \"from rdkit import Chem; print(Chem.MolFromSmiles(open('answer.txt').read()))\""
    with pytest.warns(UserWarning, match="without isolation"):
        write, parse = record("retrosynthesis", [WRITE, check], tmp_path, kind="none")
    assert shape(write) == [*by_shell(("python", "-c", "open('answer.txt','w').write('CCO')")),
                            ("open", "python", "answer.txt", "w"), ("written", "answer.txt", "CCO"),
                            ("exit", "python", 0, None)]
    assert shape(parse, ("open", "call")) == [
        ("open", "python", "answer.txt", "r"),
        ("call", "rdkit.Chem.MolFromSmiles", ("CCO",), {}, True, "<rdkit.Chem.rdchem.Mol>", None)]


@needs_bwrap
def test_a_run_keeps_one_evidence_line_per_command_beside_the_trajectory(tmp_path: Path, write_replay) -> None:
    suite = load_suite("retrosynthesis")
    task = suite.tasks()[0].id
    check = "python -c \"from rdkit import Chem; print(Chem.MolFromSmiles(open('answer.txt').read()))\""
    spec = write_replay({task: [call(WRITE), {"tool_call": {"name": "nope", "arguments": {}}}, call(check),
                                final("done")]})
    run(RunConfig(suite="retrosynthesis", student=spec, out=tmp_path / "run", task_ids=[task]))
    folder = tmp_path / "run" / "trials" / task
    evidence = read_evidence(folder / TrialFolder.EVIDENCE)
    trajectory = json.loads((folder / "trajectory.json").read_text())
    assert evidence is not None and [(e.step, e.command) for e in evidence] == [(0, WRITE), (2, check)]
    for line in evidence:  # each line points at the step and the assistant message that ran it
        step = trajectory["steps"][line.step]
        assert (step["command"], step["message_index"], step["exit_code"]) == (line.command, line.message_index,
                                                                               line.exit_code)
    # run again from the start (the trial not finished): the evidence starts over with the trajectory
    (folder / "result.json").unlink()
    append_evidence(folder / TrialFolder.EVIDENCE, evidence[0])
    run(RunConfig(suite="retrosynthesis", student=spec, out=tmp_path / "run", task_ids=[task]))
    again = read_evidence(folder / TrialFolder.EVIDENCE)
    assert again is not None and [(e.step, e.command) for e in again] == [(0, WRITE), (2, check)]


@pytest.mark.docker
def test_the_docker_sandbox_records_python_as_the_local_one_does(docker_engine: Any, docker_suites_image: str,
                                                                  tmp_path: Path) -> None:
    check = "python3 -c \"from rdkit import Chem; print(Chem.MolFromSmiles(open('answer.txt').read()))\""
    write, parse = record("retrosynthesis", [WRITE.replace("python ", "python3 "), check], tmp_path, kind="docker")
    assert write.recorder == parse.recorder == "python-audit"  # the preload library is the host's, not the image's
    assert shape(write) == [("open", "python3", "answer.txt", "w"), ("written", "answer.txt", "CCO"),
                            ("exit", "python3", 0, None)]
    assert shape(parse) == [
        ("open", "python3", "answer.txt", "r"),
        ("call", "rdkit.Chem.MolFromSmiles", ("CCO",), {}, True, "<rdkit.Chem.rdchem.Mol>", None),
        ("exit", "python3", 0, None),
    ]
    commands = ["python3 -c \"from rdkit import Chem; print(Chem.MolFromSmiles(open('answer.txt').read()) is None)\"",
                "python3 -c 'import openpyxl; openpyxl.load_workbook(\"nope.xlsx\")'",
                "echo $PATH; env | grep -v ^HOSTNAME= | sort"]
    outputs = {}
    for recorded in (True, False):
        with trial("retrosynthesis", tmp_path / str(recorded), record=recorded, kind="docker") as (sandbox, _):
            sandbox.execute(WRITE.replace("python ", "python3 "))
            outputs[recorded] = [sandbox.execute(c).observation() for c in commands]
    # the same output, but for the one variable the recorder adds (docker has no preload library)
    ours = [line for line in outputs[True][2].splitlines() if line.startswith("PYTHONPATH=")]
    assert ours == ["PYTHONPATH=/run/unscaffold-evidence/lib"]
    outputs[True][2] = outputs[True][2].replace(ours[0] + "\n", "")
    assert outputs[True] == outputs[False]
