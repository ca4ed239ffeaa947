"""TRL's copies of real chat templates, read verbatim (TRL recognises a model's template by its exact text)."""

from __future__ import annotations

from pathlib import Path

TEMPLATE_DIR_NAME = "chat_templates"


def _template_dir() -> Path:
    import trl

    return Path(trl.__file__).parent / TEMPLATE_DIR_NAME


def available_templates() -> list[str]:
    """Template names TRL ships, so a bad `template` argument can say what exists."""
    return sorted(p.stem for p in _template_dir().glob("*.jinja"))


def read_trl_template(template: str) -> str:
    """The chat template text exactly as TRL stores it (TRL identifies models by exact text)."""
    path = _template_dir() / f"{template}.jinja"
    if not path.is_file():
        raise FileNotFoundError(
            f"TRL has no chat template {template!r}; available: {', '.join(available_templates())}"
        )
    return path.read_text(encoding="utf-8")
