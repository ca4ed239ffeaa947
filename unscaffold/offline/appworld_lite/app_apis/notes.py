"""The notes app: titles, tags and contents."""

from __future__ import annotations

from typing import Any

from ..appkit import AppError, Ctx, Param, api, like


def _tags(text: str) -> list[str]:
    return [t for t in text.split(",") if t]


def _note_row(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "tags": _tags(row["tags"])}


def _tag_text(tags: Any) -> str:
    if isinstance(tags, str):
        tags = [t.strip() for t in tags.split(",")]
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise AppError(422, "tags must be a list of strings.")
    return ",".join(t.strip().lower() for t in tags if t.strip())


@api("notes", "List notes, most recently updated first (without their content).",
     "[{note_id, title, tags, updated_at}]",
     Param("query", "string", "Part of a title."), Param("tag", "string", "Only notes with this tag."), paged=True)
def show_notes(ctx: Ctx, query: str | None, tag: str | None) -> list[dict[str, Any]]:
    sql = ("SELECT note_id, title, tags, updated_at FROM notes WHERE (? IS NULL OR lower(title) LIKE ?) AND "
           "(? IS NULL OR ',' || tags || ',' LIKE ?) ORDER BY updated_at DESC, note_id DESC")
    args = (query, like(query), tag, f"%,{(tag or '').lower()},%")
    return [_note_row(r) for r in ctx.paged(sql, args)]


@api("notes", "Show one note with its content.", "{note_id, title, content, tags, created_at, updated_at}",
     Param("note_id", "integer", "The note.", required=True))
def show_note(ctx: Ctx, note_id: int) -> dict[str, Any]:
    return _note_row(ctx.one("SELECT note_id, title, content, tags, created_at, updated_at FROM notes "
                             "WHERE note_id = ?", (note_id,), "note"))


@api("notes", "Create a note.", "{message, note_id}", Param("title", "string", "The title.", required=True),
     Param("content", "string", "The text.", required=True), Param("tags", "list", "Tags (strings).", default=[]))
def create_note(ctx: Ctx, title: str, content: str, tags: Any) -> dict[str, Any]:
    note_id = ctx.insert("notes", title=title, content=content, tags=_tag_text(tags), created_at=ctx.now,
                         updated_at=ctx.now)
    return {"message": "Note created.", "note_id": note_id}


@api("notes", "Change a note; only the fields given change.", "{message}",
     Param("note_id", "integer", "The note.", required=True), Param("title", "string", "New title."),
     Param("content", "string", "New text (replaces the old)."), Param("tags", "list", "New tags (replace the old)."))
def update_note(ctx: Ctx, note_id: int, title: str | None, content: str | None, tags: Any) -> dict[str, Any]:
    show_note(ctx, note_id)
    changes = {"title": title, "content": content, "tags": None if tags is None else _tag_text(tags)}
    changes = {k: v for k, v in changes.items() if v is not None}
    if not changes:
        raise AppError(422, "Give at least one field to change.")
    for key, value in {**changes, "updated_at": ctx.now}.items():
        ctx.conn.execute(f"UPDATE notes SET {key} = ? WHERE note_id = ?", (value, note_id))
    return {"message": "Note updated."}


@api("notes", "Delete a note.", "{message}", Param("note_id", "integer", "The note.", required=True))
def delete_note(ctx: Ctx, note_id: int) -> dict[str, Any]:
    show_note(ctx, note_id)
    ctx.conn.execute("DELETE FROM notes WHERE note_id = ?", (note_id,))
    return {"message": "Note deleted."}
