"""JSON a model wrote, held without recursion: depth counted before parsing, text and values repaired so any
JSON writer accepts them. The parts the output check, the JSON readers and the reviewer share."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel

MAX_DEPTH = 32  # nesting levels of tool-call arguments (objects and lists); real calls use one or two
_TOKEN = re.compile(r'\\.|["\[\]{}]', re.S)  # one linear pass: escapes, quotes and brackets


class TooDeep(ValueError):
    """JSON text nested deeper than `MAX_DEPTH`: refused before it is parsed (the parser recurses)."""


def encodable(text: str) -> bool:
    """Whether `text` encodes as UTF-8 (a Python string may hold lone surrogates, which it cannot)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def repair_text(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD (a surrogate pair becomes its character)."""
    if encodable(text):
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def text_depth(text: str) -> int:
    """How deeply the objects and lists of JSON text nest, counted without parsing (strings skipped)."""
    depth = deepest = 0
    in_string = False
    for token in _TOKEN.findall(text):
        if token == '"':
            in_string = not in_string
        elif not in_string and len(token) == 1:
            depth += 1 if token in "[{" else -1
            deepest = max(deepest, depth)
    return deepest


def loads_bounded(text: str) -> Any:
    """`json.loads`, refusing text nested deeper than `MAX_DEPTH` with `TooDeep` (a ValueError, as
    `json.JSONDecodeError` is) instead of recursing until a RecursionError."""
    if text_depth(text) > MAX_DEPTH:
        raise TooDeep(f"nested deeper than {MAX_DEPTH} levels")
    return json.loads(text)


def value_depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """Nesting levels of dicts and lists in `value`, counted without recursion and no further than
    `limit + 1` (enough to tell it is too deep)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list | tuple):
            depth += 1
            deepest = max(deepest, depth)
            if depth > limit:
                return depth
            stack.extend((v, depth) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def value_problem(value: Any, limit: int = MAX_DEPTH) -> str | None:
    """Why `value` (decoded JSON) cannot be kept as it is: nested too deep, or a string (key or value)
    that cannot be encoded; None when it is fine."""
    if value_depth(value, limit) > limit:
        return f"nested deeper than {limit} levels"
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not encodable(item):
                return "text that cannot be encoded as UTF-8 (a lone surrogate)"
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return None


def _fields(model: BaseModel) -> dict[str, Any]:
    """A model's set fields by name (for a last-resort dump, when its own serializer cannot write it)."""
    return {name: v for name in type(model).model_fields if (v := getattr(model, name)) is not None}


def repair_value(value: Any, limit: int = MAX_DEPTH) -> Any:
    """A copy of `value` that any JSON writer accepts: strings repaired, models as their fields, and a
    container deeper than `limit` replaced by a note (the copy is made without recursion)."""
    if isinstance(value, BaseModel):
        value = _fields(value)
    if not isinstance(value, dict | list | tuple):
        return repair_text(value) if isinstance(value, str) else value
    note = f"(nested deeper than {limit} levels; not kept)"
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any, int]] = [(value, root, 0, 0)]  # (item, parent, key in parent, depth)
    while stack:
        item, parent, key, depth = stack.pop()
        if isinstance(item, BaseModel):
            item = _fields(item)
        if isinstance(item, str):
            parent[key] = repair_text(item)
        elif isinstance(item, dict | list | tuple):
            if depth >= limit:
                parent[key] = note
            elif isinstance(item, dict):
                copy: dict[str, Any] = {}
                parent[key] = copy
                for k, v in item.items():
                    name = repair_text(str(k))
                    copy[name] = None
                    stack.append((v, copy, name, depth + 1))
            else:
                items: list[Any] = [None] * len(item)
                parent[key] = items
                stack.extend((v, items, i, depth + 1) for i, v in enumerate(item))
        else:
            parent[key] = item
    return root[0]
