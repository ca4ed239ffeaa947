"""`compile-k`: h* -> K. Tools become action recipes (checked equal on examples), checks become review
middleware, skills are copied, memory becomes memory.md; index.json and reviewer_prompt.md tie it up."""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, Field

from unscaffold import __version__
from unscaffold.errors import InputError
from unscaffold.iojson import write_json_atomic, write_text_atomic
from unscaffold.knowledge.bank import Bank, CheckSpec, ToolSpec, load_bank
from unscaffold.knowledge.hstar import MOUNT_POINT, script_command
from unscaffold.knowledge.kfolder import INDEX, REVIEWER_PROMPT, K, KComponent, KIndex, Recipe, load_k
from unscaffold.knowledge.middleware import Middleware
from unscaffold.minimal_harness.sandbox import SandboxConfig, open_sandbox
from unscaffold.minimal_harness.sandbox.base import Mount, SandboxKind

DELIMITER = "UNSCAFFOLD_RECIPE"
EXAMPLE_WORKDIR = "/workspace"


class RecipeCheck(BaseModel):
    tool: str
    example: int
    same_output: bool
    same_files: bool


class CompileReport(BaseModel):
    bank: str
    out: str
    components: int
    recipe_checks: list[RecipeCheck] = Field(default_factory=list)


def recipe_for(bank: Bank, tool: ToolSpec) -> Recipe:
    """The tool's own script inlined as a heredoc, so one `execute` call does what the tool did."""
    source = bank.script_source(tool)
    if DELIMITER in source:
        raise InputError(str(bank.path(tool.script)), None, f"the script may not contain {DELIMITER!r}")
    runner = "python3 - {args}" if tool.script.endswith(".py") else "bash -s -- {args}"
    template = f"{runner} <<'{DELIMITER}'\n{source.rstrip()}\n{DELIMITER}"
    return Recipe(tool=tool.name, description=tool.description, parameters=tool.parameters,
                  command_template=template)


def recipe_markdown(tool: ToolSpec, recipe: Recipe) -> str:
    props = tool.parameters.get("properties", {})
    required = set(tool.parameters.get("required", []))
    rows = "\n".join(
        f"| `{name}` | {spec.get('type', 'any')} | {'yes' if name in required else 'no'} "
        f"| {spec.get('description', '')} |"
        for name, spec in props.items()
    )
    example = recipe.command(tool.examples[0].arguments)
    return (
        f"# Action recipe: {tool.name}\n\n{tool.description}\n\n"
        f"| argument | type | required | meaning |\n|---|---|---|---|\n{rows}\n\n"
        "Do the same with one `execute` call: the JSON arguments go in place of `{args}` (shell-quoted).\n\n"
        f"```bash\n{recipe.command_template}\n```\n\nExample:\n\n```bash\n{example}\n```\n"
    )


def _tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@contextlib.contextmanager
def example_workspace(bank: Bank) -> Iterator[Callable[[Path], AbstractContextManager[None]]]:
    """How each example's workspace is prepared on the host: by the suite the bank names (open while the
    examples run, closed after), else not at all."""
    name = bank.manifest.example_suite
    if name is None:
        yield lambda workspace: contextlib.nullcontext()
        return
    from unscaffold.benchmarks import load_suite
    from unscaffold.suites import find

    find(name, str(bank.root / "manifest.toml"), "example_suite")
    with load_suite(name) as suite:
        yield suite.example_workspace


def check_recipe(bank: Bank, tool: ToolSpec, recipe: Recipe, kind: SandboxKind) -> list[RecipeCheck]:
    """Run tool and recipe on each example in fresh sandboxes; both output and files must agree."""
    checks = []
    with example_workspace(bank) as prepared, tempfile.TemporaryDirectory(prefix="unscaffold-recipe-") as tmp:
        for i, example in enumerate(tool.examples):
            outcomes = []
            for side in ("tool", "recipe"):
                ws = Path(tmp) / f"{tool.name}-{i}-{side}"
                ws.mkdir()
                mounts = [Mount(source=bank.root, target=MOUNT_POINT)] if side == "tool" else []
                workdir = EXAMPLE_WORKDIR if kind != "none" else None
                with prepared(ws):
                    sandbox = open_sandbox(SandboxConfig(kind=kind, workspace=ws, workdir=workdir, mounts=mounts))
                    try:
                        if example.setup:
                            setup = sandbox.execute(example.setup)
                            if setup.exit_code != 0:
                                raise InputError(str(bank.root / "manifest.toml"),
                                                 f"tools.{tool.name}.examples.{i}.setup",
                                                 f"setup failed: {setup.observation()[-300:]}")
                        command = (script_command(tool.script, example.arguments) if side == "tool"
                                   else recipe.command(example.arguments))
                        result = sandbox.execute(command)
                    finally:
                        sandbox.close()
                outcomes.append((result.observation(), _tree_digest(ws)))
            (out_tool, files_tool), (out_recipe, files_recipe) = outcomes
            check = RecipeCheck(tool=tool.name, example=i, same_output=out_tool == out_recipe,
                                same_files=files_tool == files_recipe)
            if not (check.same_output and check.same_files):
                what = "output" if not check.same_output else "files written"
                detail = f"tool gave {out_tool[-200:]!r}, recipe gave {out_recipe[-200:]!r}" if not check.same_output \
                    else f"tool wrote {sorted(files_tool)}, recipe wrote {sorted(files_recipe)}"
                raise InputError(str(bank.root / "manifest.toml"), f"tools.{tool.name}.examples.{i}",
                                 f"the recipe's {what} differs from the tool's: {detail}")
            checks.append(check)
    return checks


def middleware_for(bank: Bank, index: int, check: CheckSpec) -> Middleware:
    source, field = str(bank.root / "manifest.toml"), f"checks.{index}.transcript_rule"
    rule = check.transcript_rule
    if rule is None:
        raise InputError(source, field, f"check {check.name!r} has no transcript_rule, so it cannot become "
                         "review middleware (a check is never dropped silently)")
    conditions = [rule.command_matches, rule.command_lacks, rule.require_prior_command,
                  rule.last_observation_matches, rule.repeated_error, rule.min_turn, rule.at_turns,
                  rule.content_matches]
    if rule.when == "any" and all(c is None for c in conditions):
        raise InputError(source, field, "the rule has no condition, so it would fire on every step")
    return Middleware(component_id=f"check:{check.name}", rule=rule)


def middleware_markdown(check: CheckSpec, mw: Middleware) -> str:
    rule = mw.rule.model_dump(exclude_none=True, exclude={"instruction", "remedy"})
    conditions = "\n".join(f"- {k}: `{v}`" for k, v in rule.items())
    remedy = f"\nSuggested action: the `{mw.rule.remedy.tool}` recipe.\n" if mw.rule.remedy else ""
    return (f"# Review middleware: {check.name}\n\n{check.description}\n\nFires when:\n{conditions}\n\n"
            f"Instruction: {mw.rule.instruction}\n{remedy}")


def memory_markdown(bank: Bank) -> str:
    parts = ["# Memory: recurring errors\n"]
    for r in bank.memory_rules:
        parts.append(f"## {r.name}\n\n- Trigger: {r.trigger}\n- Evidence: {r.evidence}\n"
                     f"- Intervention: {r.intervention}\n- Do not trigger: {r.do_not_trigger}\n")
    return "\n".join(parts)


def compile_k(bank_path: Path, out: Path, *, sandbox: SandboxKind = "local", verify: bool = True) -> CompileReport:
    bank = load_bank(bank_path)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    report = CompileReport(bank=str(bank.root), out=str(out), components=0)
    components: list[KComponent] = []
    try:
        for tool in bank.manifest.tools:
            recipe = recipe_for(bank, tool)
            if verify:
                report.recipe_checks += check_recipe(bank, tool, recipe, sandbox)
            write_json_atomic(staging / "recipes" / f"{tool.name}.json", recipe.model_dump())
            write_text_atomic(staging / "recipes" / f"{tool.name}.md", recipe_markdown(tool, recipe))
            components.append(KComponent(id=f"tool:{tool.name}", kind="tool", path=f"recipes/{tool.name}.md",
                                         data=f"recipes/{tool.name}.json", summary=tool.description))
        for i, check in enumerate(bank.manifest.checks):
            mw = middleware_for(bank, i, check)
            write_json_atomic(staging / "middleware" / f"{check.name}.json", mw.model_dump(exclude_none=True))
            write_text_atomic(staging / "middleware" / f"{check.name}.md", middleware_markdown(check, mw))
            components.append(KComponent(id=f"check:{check.name}", kind="check", path=f"middleware/{check.name}.md",
                                         data=f"middleware/{check.name}.json", summary=check.description))
        for skill in bank.manifest.skills:
            shutil.copyfile(bank.path(skill.path), _ensure(staging / "skills" / f"{skill.name}.md"))
            components.append(KComponent(id=f"skill:{skill.name}", kind="skill", path=f"skills/{skill.name}.md",
                                         summary=skill.summary))
        if bank.manifest.memory:
            write_text_atomic(staging / "memory.md", memory_markdown(bank))
            for m in bank.manifest.memory:
                components.append(KComponent(id=f"memory:{m.name}", kind="memory", path="memory.md",
                                             summary=m.summary))
        listing = "\n".join(f"- `{c.id}` ({c.path}): {c.summary}" for c in components)
        template = resources.files("unscaffold.knowledge").joinpath("reviewer_prompt.md").read_text("utf-8")
        prompt = template.replace("{bank}", bank.manifest.name).replace("{components}", listing)
        write_text_atomic(staging / REVIEWER_PROMPT, prompt)
        index = KIndex(bank=bank.manifest.name, unscaffold_version=__version__, components=components)
        write_json_atomic(staging / INDEX, index.model_dump())
        load_k(staging)  # the result must pass the same validation every reader applies
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    report.components = len(components)
    return report


def _ensure(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def find_leaks(texts: dict[str, str], markers: list[str]) -> list[tuple[str, str]]:
    """(name, marker) for every text that contains a marker as a whole word.

    A plain substring test screens each marker first, so 100,000 markers (a real USPTO-50k) cost
    seconds; the word-boundary regex only runs on the few that occur at all."""
    import re

    everything = "\n".join(texts.values())
    found = []
    for marker in markers:
        if not marker or marker not in everything:
            continue
        word = re.compile(rf"(?<![\w-]){re.escape(marker)}(?![\w-])")
        found += [(name, marker) for name, text in texts.items() if word.search(text)]
    return found


def lint_k(k: K, markers: list[str]) -> list[str]:
    """Task ids or gold answers of the suite K serves must not appear anywhere in K (as whole words)."""
    texts = {str(p.relative_to(k.root)): p.read_text(encoding="utf-8", errors="replace") for p in k.files()}
    return sorted(f"{name} contains {marker!r}" for name, marker in find_leaks(texts, markers))

