"""Is an edited bank executable? Its manifest loads (memory rules and detectors parse), compile-k
accepts it (each tool runs on its examples, matching its recipe; each check has a transcript rule),
each check script runs on a sample context, and the compiled K passes the suite's leak lint.

Every problem is raised as an InvalidSubmission, so it goes back to the editor like a format error."""

from __future__ import annotations

import tempfile
from pathlib import Path

from unscaffold.errors import UnscaffoldError
from unscaffold.knowledge.bank import Bank, load_bank
from unscaffold.knowledge.compiler import compile_k, lint_k
from unscaffold.knowledge.hstar import MOUNT_POINT, script_command
from unscaffold.knowledge.kfolder import load_k
from unscaffold.minimal_harness.sandbox import SandboxConfig, open_sandbox
from unscaffold.minimal_harness.sandbox.base import DEFAULT_COMMAND_TIMEOUT_S, Mount, SandboxKind
from unscaffold.reviewer.submission import InvalidSubmission

SAMPLE_CONTEXT = {
    "before_command": {"command": "ls", "turn": 1},
    "after_command": {"command": "ls", "output": "", "exit_code": 0, "turn": 1},
    "before_finish": {"final_answer": "done", "turn": 1},
}
def run_checks(bank: Bank, kind: SandboxKind) -> None:
    """Each check must decide (exit 0 passes, 1 blocks) on a sample context in an empty workspace."""
    for check in bank.manifest.checks:
        with tempfile.TemporaryDirectory(prefix="unscaffold-check-") as ws:
            sandbox = open_sandbox(SandboxConfig(kind=kind, workspace=Path(ws),
                                                 mounts=[Mount(source=bank.root, target=MOUNT_POINT)]))
            try:
                context = {"hook": check.hook, **SAMPLE_CONTEXT[check.hook]}
                result = sandbox.execute(script_command(check.script, context), timeout_s=DEFAULT_COMMAND_TIMEOUT_S)
            finally:
                sandbox.close()
        if result.exit_code not in (0, 1):
            raise InvalidSubmission(f"the edited bank is invalid: check `{check.name}` crashed on a sample "
                                    f"context (exit {result.exit_code}): {result.output.strip()[-200:]!r}")


def validate_bank(root: Path, markers: list[str], kind: SandboxKind) -> Bank:
    try:
        bank = load_bank(root)
        with tempfile.TemporaryDirectory(prefix="unscaffold-evolve-k-") as tmp:
            compile_k(root, Path(tmp) / "k", sandbox=kind, verify=True)
            problems = lint_k(load_k(Path(tmp) / "k"), markers)
    except UnscaffoldError as e:
        message = str(e).replace(str(Path(root).resolve()), "bank").replace(str(root), "bank")
        raise InvalidSubmission(f"the edited bank is invalid: {message}") from None
    if problems:
        raise InvalidSubmission(f"edit rejected: the compiled K leaks: {problems[0]}")
    run_checks(bank, kind)
    return bank
