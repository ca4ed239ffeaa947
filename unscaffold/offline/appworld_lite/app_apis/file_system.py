"""The file_system app: files addressed by paths such as ~/documents/report.txt."""

from __future__ import annotations

import re
from typing import Any

from ..appkit import AppError, Ctx, Param, api

PATH_RE = re.compile(r"^~(/[A-Za-z0-9._ -]+)+$")


def clean_path(path: str, what: str = "path") -> str:
    path = path.rstrip("/") if path not in ("~", "~/") else "~"
    if path != "~" and not PATH_RE.match(path):
        raise AppError(422, f"Invalid {what} {path!r}: use paths like ~/documents/notes.txt.")
    return path


def _file(ctx: Ctx, file_path: str) -> dict[str, Any]:
    return ctx.one("SELECT path AS file_path, content, created_at, updated_at FROM files WHERE path = ?",
                   (clean_path(file_path, "file_path"),), "file at that path")


@api("file_system", "List what a directory holds (files and sub-directories), by name.",
     "[{path, name, type}] (type is file or directory)",
     Param("directory_path", "string", "e.g. ~/documents", required=True), paged=True)
def show_directory(ctx: Ctx, directory_path: str) -> list[dict[str, Any]]:
    base = clean_path(directory_path, "directory_path")
    entries: dict[str, str] = {}
    for (path,) in ctx.conn.execute("SELECT path FROM files WHERE path LIKE ?", (base + "/%",)):
        rest = path[len(base) + 1:]
        name, _, deeper = rest.partition("/")
        entries[name] = "directory" if deeper else entries.get(name, "file")
    if not entries and base != "~":
        raise AppError(404, f"No directory {base!r}.")
    return [{"path": f"{base}/{n}", "name": n, "type": entries[n]} for n in ctx.page_of(sorted(entries))]


@api("file_system", "Show a file with its content.", "{file_path, content, created_at, updated_at}",
     Param("file_path", "string", "e.g. ~/documents/notes.txt", required=True))
def show_file(ctx: Ctx, file_path: str) -> dict[str, Any]:
    return _file(ctx, file_path)


@api("file_system", "Create a file (its directories need not exist).", "{message}",
     Param("file_path", "string", "e.g. ~/documents/notes.txt", required=True),
     Param("content", "string", "The text.", default=""))
def create_file(ctx: Ctx, file_path: str, content: str) -> dict[str, Any]:
    path = clean_path(file_path, "file_path")
    if ctx.rows("SELECT 1 FROM files WHERE path = ?", (path,)):
        raise AppError(409, f"A file already exists at {path!r}.")
    ctx.insert("files", path=path, content=content, created_at=ctx.now, updated_at=ctx.now)
    return {"message": "File created."}


@api("file_system", "Delete a file.", "{message}",
     Param("file_path", "string", "e.g. ~/documents/notes.txt", required=True))
def delete_file(ctx: Ctx, file_path: str) -> dict[str, Any]:
    row = _file(ctx, file_path)
    ctx.conn.execute("DELETE FROM files WHERE path = ?", (row["file_path"],))
    return {"message": "File deleted."}


@api("file_system", "Move or rename a file.", "{message}",
     Param("source_file_path", "string", "Where the file is now.", required=True),
     Param("destination_file_path", "string", "Its new path, file name included.", required=True))
def move_file(ctx: Ctx, source_file_path: str, destination_file_path: str) -> dict[str, Any]:
    row = _file(ctx, source_file_path)
    target = clean_path(destination_file_path, "destination_file_path")
    if ctx.rows("SELECT 1 FROM files WHERE path = ?", (target,)):
        raise AppError(409, f"A file already exists at {target!r}.")
    ctx.conn.execute("UPDATE files SET path = ?, updated_at = ? WHERE path = ?", (target, ctx.now, row["file_path"]))
    return {"message": "File moved."}
