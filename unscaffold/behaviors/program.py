"""What a student's commands did, read from their structure rather than their spelling.

A command is split into shell segments (quote-aware), heredoc bodies are tied to the segment that
reads them, and every Python program a segment runs is found: `python3 -c CODE`, `python3 - <<EOF`,
`cat <<EOF | python3`, or `python3 FILE` where FILE was written earlier (a heredoc, `printf > FILE`).
A script that is only written is not run, so it shows nothing until a later command runs it. Files the
shell writes (`>`, `>>`, `tee`, `sed -i`, `cp`, `mv`) and reads (`cat`, `head`, ...) are recorded with
their order, so detectors can ask "after the last write" of the shell and of Python alike."""

from __future__ import annotations

import ast
import json
import re
import shlex
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cached_property

from unscaffold.llm.types import assistant_calls, command_of
from unscaffold.minimal_harness.trajectory import Trajectory

HEREDOC = re.compile(r"<<(-?)\s*(?:'([^'\n]+)'|\"([^\"\n]+)\"|\\?([A-Za-z_][\w.]*))")
PYTHON = re.compile(r"(?:^|/)python(?:3(?:\.\d+)?)?$")
SHOW = {"cat", "head", "tail", "nl", "less", "more", "bat", "xxd", "od", "column", "diff", "cmp", "wc", "awk",
        "sed", "grep", "jq", "csvlook"}
PREFIXES = {"sudo", "env", "nice", "time", "command", "exec", "nohup", "stdbuf"}
# Bounds on what the detectors read of one student's commands: they run on the host over hostile text, so a
# program past a bound is not read (it shows nothing, and the table notes it) instead of crashing or stalling.
MAX_COMMAND_CHARS = 256 * 1024  # one command (heredoc bodies included)
MAX_SCRIPT_DEPTH = 4  # `bash x.sh` running a script that runs a script ... (a script that runs itself stops here)
MAX_TREE_DEPTH = 150  # nesting of one program's syntax tree (the analysis walks it recursively)
TRIAL_SECONDS = 5.0  # analysis time for one trajectory, every detector of the bank together


class AnalysisTimeout(Exception):
    """The analysis of one trajectory ran past its time bound."""


_deadline: ContextVar[float | None] = ContextVar("detector_deadline", default=None)


@contextmanager
def time_bound(seconds: float = TRIAL_SECONDS) -> Iterator[None]:
    """Bound the analysis inside to `seconds`: the long loops call `check_time`, which raises `AnalysisTimeout`."""
    token = _deadline.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _deadline.reset(token)


def check_time() -> None:
    deadline = _deadline.get()
    if deadline is not None and time.monotonic() > deadline:
        raise AnalysisTimeout(f"analysis ran past {TRIAL_SECONDS:g} s")


def tree_depth(tree: ast.AST) -> int:
    """How deeply the tree nests (without recursion, so a deep tree cannot exhaust the stack here)."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def parse_python(code: str) -> tuple[ast.Module | None, str | None]:
    """(the tree, None), or (None, why it cannot be read): a syntax error (the program never ran, so it shows
    nothing and needs no note), or a bound (too long, nested too deeply), which the table notes."""
    if len(code) > MAX_COMMAND_CHARS:
        return None, f"a program of {len(code):,} characters (over {MAX_COMMAND_CHARS:,}) was not read"
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None, None
    except (RecursionError, MemoryError) as e:
        return None, f"a program nested too deeply to parse ({type(e).__name__}) was not read"
    if tree_depth(tree) > MAX_TREE_DEPTH:
        return None, f"a program nested deeper than {MAX_TREE_DEPTH} levels was not read"
    return tree, None


@dataclass
class Program:
    """A Python program one segment ran, with what it was given."""

    code: str
    argv: list[str]
    stdin: str | None  # the file fed on stdin, if any
    order: int  # position among the step's events

    @cached_property
    def parsed(self) -> tuple[ast.Module | None, str | None]:
        return parse_python(self.code)

    @property
    def tree(self) -> ast.Module | None:
        """None for a program that is not Python we can read: it shows no behaviour (it did not run, or it
        is past a bound: `unreadable` says which)."""
        return self.parsed[0]

    @property
    def unreadable(self) -> str | None:
        return self.parsed[1]


@dataclass
class FileEvent:
    kind: str  # "write" or "read"
    path: str
    order: int
    content: str | None = None  # what a shell write put there, when the command says it literally
    how: str = ""  # the command word (echo, printf, tee, cat, python, ...)


@dataclass
class Step:
    """One student action: an `execute` command, or a call of an h* tool (`tool` names it)."""

    index: int
    tool: str
    arguments: dict
    command: str = ""
    observation: str = ""
    programs: list[Program] = field(default_factory=list)
    files: list[FileEvent] = field(default_factory=list)
    words: list[list[str]] = field(default_factory=list)  # each shell segment's words (command first)
    message_index: int = -1  # index into Trajectory.messages of the assistant message that made the call
    bounded: bool = False  # some segment ran under `timeout` with a limit (`timeout 0` sets none)
    notes: list[str] = field(default_factory=list)  # what the analysis could not read, and why


def split_heredocs(command: str) -> tuple[str, dict[str, str]]:
    """The command with each heredoc body replaced by a `__HEREDOC_n__` word, and the bodies."""
    lines = command.split("\n")
    out: list[str] = []
    bodies: dict[str, str] = {}
    i = 0
    while i < len(lines):
        pending: list[tuple[str, str, bool]] = []
        text, start = "", 0
        for m in HEREDOC.finditer(lines[i]):
            key = f"__HEREDOC_{len(bodies) + len(pending)}__"
            pending.append((key, m.group(2) or m.group(3) or m.group(4), m.group(1) == "-"))
            text += lines[i][start:m.start()] + f"< {key}"
            start = m.end()
        out.append(text + lines[i][start:])
        i += 1
        for key, delimiter, strip_tabs in pending:
            body = []
            while i < len(lines) and (lines[i].lstrip("\t") if strip_tabs else lines[i]) != delimiter:
                body.append(lines[i])
                i += 1
            i += 1
            bodies[key] = "\n".join(body)
    return "\n".join(out), bodies


def split_segments(text: str) -> list[tuple[str, str]]:
    """(segment, the operator after it), splitting at unquoted `;`, newlines, `&&`, `||`, `|` and `&`."""
    segments: list[tuple[str, str]] = []
    start, i, quote, depth = 0, 0, "", 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\" and quote == '"':
                i += 2
                continue
            if c == quote:
                quote = ""
        elif c == "\\":
            i += 2
            continue
        elif c == "#" and (i == 0 or text[i - 1] in " \t\n;&|()"):  # a comment runs to the end of the line
            end = text.find("\n", i)
            text = text[:i] + (text[end:] if end >= 0 else "")
            continue
        elif c in "'\"":
            quote = c
        elif text.startswith("$(", i):
            depth += 1
        elif c == ")" and depth:
            depth -= 1
        elif depth == 0 and c in ";\n|&":
            op = text[i:i + 2] if text[i:i + 2] in ("&&", "||", ";;") else c
            if c == "&" and (text[i - 1:i] in "<>" or text[i + 1:i + 2] == ">"):
                i += 1
                continue
            segments.append((text[start:i], op))
            i += len(op)
            start = i
            continue
        i += 1
    segments.append((text[start:], ""))
    return [(s.strip(), op) for s, op in segments if s.strip()]


def words_of(segment: str) -> list[str]:
    try:
        return shlex.split(segment, posix=True)
    except ValueError:
        return segment.split()


def strip_prefixes(words: list[str]) -> tuple[list[str], bool]:
    """Drop `VAR=x`, `sudo`, `env` and `timeout [opts] DURATION`; say whether a timeout bounded it."""
    bounded = False
    while words:
        head = words[0]
        if re.match(r"^[A-Za-z_]\w*=", head) or head in PREFIXES or head in ("(", "{", "then", "do", "else", "!"):
            words = words[1:]
        elif head == "timeout":
            rest = words[1:]
            while rest and rest[0].startswith("-"):
                rest = rest[2:] if rest[0] in ("-s", "-k", "--signal", "--kill-after") else rest[1:]
            if rest and (m := re.match(r"^(\d+(?:\.\d+)?)[smhd]?$", rest[0])):
                bounded = bounded or float(m.group(1)) > 0  # `timeout 0` sets no limit
                rest = rest[1:]
            words = rest
        else:
            break
    return words, bounded


def redirections(words: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """Words without redirections, and the redirections as (operator, target)."""
    plain, redirs = [], []
    i = 0
    while i < len(words):
        w = words[i]
        m = re.match(r"^(\d?>>?|&>>?|<)(.*)$", w)
        if m and not w.startswith("<<"):
            target = m.group(2) or (words[i + 1] if i + 1 < len(words) else "")
            redirs.append((m.group(1).lstrip("0123456789") if not m.group(1).startswith("2") else "2>", target))
            i += 1 if m.group(2) else 2
            continue
        plain.append(w)
        i += 1
    return plain, redirs


def echo_content(words: list[str]) -> str | None:
    """What `echo` or `printf` prints, as far as the words say it."""
    if not words:
        return None
    if words[0] == "echo":
        args = [w for w in words[1:] if not re.match(r"^-[neE]+$", w)]
        return " ".join(args)
    if words[0] == "printf" and len(words) > 1:
        fmt, args = words[1], words[2:]
        if "%s" in fmt and args:
            return "\n".join(args) if fmt.replace("\\n", "") == "%s" else fmt.replace("%s", args[0], 1)
        return fmt.replace("\\n", "\n").rstrip("\n")
    return None


def parse_command(step: Step, files_so_far: dict[str, str], depth: int = 0) -> None:
    """Fill the step's programs, file events and words from its command (`depth`: scripts run within scripts)."""
    if len(step.command) > MAX_COMMAND_CHARS:
        step.notes.append(f"a command of {len(step.command):,} characters (over {MAX_COMMAND_CHARS:,}) was not read")
        return
    text, bodies = split_heredocs(step.command)
    order = 0
    stdin_from_pipe: str | None = None
    piped_code: str | None = None
    piped_content: str | None = None
    for segment, op in split_segments(text):
        check_time()
        words, bounded = strip_prefixes(words_of(segment))
        step.bounded |= bounded
        words, redirs = redirections(words)
        heredoc = next((bodies[t] for o, t in redirs if o == "<" and t in bodies), None)
        stdin_file = next((t for o, t in redirs if o == "<" and t not in bodies), None) or stdin_from_pipe
        step.words.append(words)
        head = words[0].rsplit("/", 1)[-1] if words else ""
        content = heredoc if head == "cat" and heredoc is not None else echo_content(words)
        if head == "cat" and heredoc is None and len(words) == 1 and piped_content is not None:
            content = piped_content
        order += 1
        if PYTHON.search(head) or head in ("python", "python3"):
            args = words[1:]
            code = None
            while args and args[0].startswith("-") and args[0] not in ("-", "-c", "-m"):
                args = args[1:]
            if args[:1] == ["-c"] and len(args) > 1:
                code, argv = args[1], args[2:]
            elif args[:1] == ["-m"]:
                code, argv = None, []
            elif not args or args[0] == "-":
                code = heredoc if heredoc is not None else piped_code
                argv = args[1:]
                if heredoc is None and piped_code is None and stdin_file in files_so_far:
                    code = files_so_far[stdin_file]
                if heredoc is not None:
                    stdin_file = None
            else:
                code, argv = files_so_far.get(args[0].removeprefix("./")), args[1:]
            if code is not None:
                step.programs.append(Program(code=code, argv=argv, stdin=stdin_file if code is not heredoc else None,
                                             order=order))
        elif head in ("bash", "sh") and len(words) > 1 and words[1].removeprefix("./") in files_so_far:
            nested = Step(index=step.index, tool="execute", arguments={}, command=files_so_far[words[1].removeprefix(
                "./")])
            if depth < MAX_SCRIPT_DEPTH:
                parse_command(nested, files_so_far, depth + 1)
            else:
                nested.notes.append(f"scripts run within scripts deeper than {MAX_SCRIPT_DEPTH} levels were not read")
            step.notes += [n for n in nested.notes if n not in step.notes]
            for p in nested.programs:
                step.programs.append(Program(code=p.code, argv=p.argv, stdin=p.stdin, order=order))
            step.files += [FileEvent(e.kind, e.path, order, e.content, e.how) for e in nested.files]
        elif head == "tee":
            for target in [w for w in words[1:] if not w.startswith("-")]:
                step.files.append(FileEvent("write", target, order, piped_content, "tee"))
                files_so_far[target] = piped_content or ""
        elif head == "sed" and any(w.startswith("-i") for w in words[1:]) and len(words) > 2:
            step.files.append(FileEvent("write", words[-1], order, None, "sed"))
        elif head in ("cp", "mv") and len(words) >= 3:
            step.files.append(FileEvent("write", words[-1], order, files_so_far.get(words[-2]), head))
        elif head in SHOW:
            operands = [w for w in words[1:] if not w.startswith("-")]
            if head in ("awk", "sed", "grep", "jq") and operands:
                operands = operands[1:]  # the program or the pattern
            for target in operands:
                if not re.search(r"[{}$'\"\\]|^\d+$", target) and not any(o == "<" for o, _ in redirs):
                    step.files.append(FileEvent("read", target, order, None, head))
        for o, target in redirs:
            if o in (">", ">>", "&>", "&>>") and target not in bodies:
                step.files.append(FileEvent("write", target, order, content, head))
                files_so_far[target] = (files_so_far.get(target, "") if o.endswith(">>") else "") + (content or "")
        piped_code = heredoc if op == "|" and head == "cat" and heredoc is not None else None
        piped_content = content if op == "|" else None
        stdin_from_pipe = (words[1] if op == "|" and head == "cat" and len(words) == 2 else None)


def recipe_call(command: str, scripts: dict[str, list[tuple[str, set[str]]]]) -> tuple[str, dict] | None:
    """A bank tool's recipe (the tool's own script inlined) run under h: the same call as the tool."""
    m = re.match(r"^(?:python3 -|bash -s --) ('(?:[^']|'\\'')*')\s+<<'UNSCAFFOLD_RECIPE'\n(.*)\nUNSCAFFOLD_RECIPE\s*$",
                 command, re.S)
    if not m or m.group(2).rstrip() not in scripts:
        return None
    try:
        arguments = json.loads(shlex.split(m.group(1))[0])
    except (ValueError, IndexError):
        return None
    if not isinstance(arguments, dict):
        return None
    for name, props in scripts[m.group(2).rstrip()]:
        if set(arguments) <= props:
            return name, arguments
    return None


def steps_of(traj: Trajectory, scripts: dict[str, list[tuple[str, set[str]]]] | None = None) -> list[Step]:
    """Every student action in order, with what each did; a recipe run counts as its tool's call. A worked-example
    opening is the suite's, not the student's: its calls are skipped."""
    messages = traj.messages[traj.opening_messages:]
    results = {m.tool_call_id: m.content for m in messages if m.role == "tool" and m.tool_call_id}
    ids = [(traj.opening_messages + j, c.id) for j, m in enumerate(messages) if m.role == "assistant"
           for c in m.tool_calls or ()]
    files: dict[str, str] = {}
    steps = []
    for i, ((at, call_id), call) in enumerate(zip(ids, assistant_calls(messages), strict=True)):
        command = command_of(call)
        observation = results.get(call_id, "")
        if command is None:
            args = call.arguments if isinstance(call.arguments, dict) else {}
            steps.append(Step(index=i, tool=call.name, arguments=args, observation=observation, message_index=at))
            continue
        recipe = recipe_call(command, scripts or {})
        if recipe is not None:
            steps.append(Step(index=i, tool=recipe[0], arguments=recipe[1], command=command, observation=observation,
                              message_index=at))
            continue
        step = Step(index=i, tool="execute", arguments={"command": command}, command=command, observation=observation,
                    message_index=at)
        parse_command(step, files)
        steps.append(step)
    return steps
