"""Writes examples/harbor_words/: sixteen one-line Harbor tasks ("Create a file `/app/NAME.txt` whose only
line is `WORD`.") and their split, the toy family a small real model is distilled on (docs/models.md).

Each task is a folder Harbor reads (instruction.md, task.toml, tests/test.sh, solution/solve.sh); the
split (10 train, 6 test) is `examples/harbor_words/split.json`. `reviewer.json` is a recorded reviewer for
collection: per task, it replaces the student's first proposal with the words bank's `write_line` recipe
(examples/hstar/words_k) and its second with a short closing answer, as a reviewer reading K would. Run it
again to regenerate the folders (`python scripts/make_words_tasks.py [OUT]` writes them into OUT instead)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "examples" / "harbor_words"
PAIRS = [
    ("fruit", "apple"), ("color", "green"), ("animal", "otter"), ("city", "Lisbon"),
    ("planet", "Mars"), ("metal", "copper"), ("tree", "maple"), ("bird", "robin"),
    ("river", "Danube"), ("gem", "ruby"), ("fish", "salmon"), ("flower", "tulip"),
    ("spice", "cumin"), ("cloud", "cirrus"), ("stone", "granite"), ("drink", "cocoa"),
]
N_TRAIN = 10
K = Path(__file__).resolve().parent.parent / "examples" / "hstar" / "words_k"
TASK_TOML = """version = "1.0"

[metadata]
difficulty = "easy"
category = "files"
family = "harbor_words"

[verifier]
timeout_sec = 30.0

[agent]
timeout_sec = 3600.0
"""


def write_task(root: Path, name: str, word: str) -> str:
    """One task folder; returns its id (the folder name)."""
    task_id = f"word-{name}"
    folder = root / task_id
    (folder / "tests").mkdir(parents=True)
    (folder / "solution").mkdir()
    path = f"/app/{name}.txt"
    (folder / "instruction.md").write_text(f"Create a file `{path}` whose only line is `{word}`.\n")
    (folder / "task.toml").write_text(TASK_TOML)
    test = (f'#!/bin/bash\nif [ "$(cat {path} 2>/dev/null)" = "{word}" ]; then\n'
            "  echo 1 > /logs/verifier/reward.txt\nelse\n  echo 0 > /logs/verifier/reward.txt\nfi\n")
    (folder / "tests" / "test.sh").write_text(test)
    (folder / "solution" / "solve.sh").write_text(f"#!/bin/bash\necho '{word}' > {path}\n")
    for script in (folder / "tests" / "test.sh", folder / "solution" / "solve.sh"):
        script.chmod(0o755)
    return task_id


def reviewer_entries(name: str, word: str) -> list[dict[str, object]]:
    """The recorded review of one task: the write, then the closing answer."""
    from unscaffold.knowledge.kfolder import load_k

    path = f"/app/{name}.txt"
    command = load_k(K).recipes["write_line"].command({"path": path, "text": word})
    write = {"decision": "REPLACE", "components_used": ["check:write_before_finish", "tool:write_line"],
             "reason": "No command has written the file the task asks for.",
             "replacement": {"reasoning": "The task asks for a file with one line, so I write that line to it.",
                             "tool_call": {"name": "execute", "arguments": {"command": command}}}}
    answer = {"decision": "REPLACE", "components_used": [], "reason": "The closing answer should say what was done.",
              "replacement": {"content": f"The file `{path}` now holds the line `{word}`."}}
    return [write, answer]


def main() -> None:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    ids = [write_task(root, name, word) for name, word in PAIRS]
    split = {"comment": "examples/harbor_words, written by scripts/make_words_tasks.py",
             "train": ids[:N_TRAIN], "validation": [], "test": ids[N_TRAIN:]}
    (root / "split.json").write_text(json.dumps(split, indent=1) + "\n")
    reviewer = {f"word-{name}": reviewer_entries(name, word) for name, word in PAIRS}
    (root / "reviewer.json").write_text(json.dumps(reviewer, indent=1) + "\n")
    print(f"{len(ids)} tasks in {root} (train {N_TRAIN}, test {len(ids) - N_TRAIN})")


if __name__ == "__main__":
    main()
