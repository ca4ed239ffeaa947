"""Writes examples/harbor_words/: sixteen one-line Harbor tasks ("Create a file `/app/NAME.txt` whose only
line is `WORD`.") and their split, the toy family a small real model is distilled on (docs/models.md).

Each task is a folder Harbor reads (instruction.md, task.toml, tests/test.sh, solution/solve.sh); the
split (10 train, 6 test) is `examples/harbor_words/split.json`. Run it again to regenerate the folders
(`python scripts/make_words_tasks.py [OUT]` writes them into OUT instead)."""

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


def main() -> None:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    ids = [write_task(root, name, word) for name, word in PAIRS]
    split = {"comment": "examples/harbor_words, written by scripts/make_words_tasks.py",
             "train": ids[:N_TRAIN], "validation": [], "test": ids[N_TRAIN:]}
    (root / "split.json").write_text(json.dumps(split, indent=1) + "\n")
    print(f"{len(ids)} tasks in {root} (train {N_TRAIN}, test {len(ids) - N_TRAIN})")


if __name__ == "__main__":
    main()
