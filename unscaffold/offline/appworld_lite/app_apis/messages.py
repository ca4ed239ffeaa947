"""The messages app: text messages sent and received."""

from __future__ import annotations

from typing import Any

from ..appkit import AppError, Ctx, Param, api, like

MESSAGE = "message_id, sender_email, receiver_email, text, sent_at, is_read"


def _message_row(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "is_read": bool(row["is_read"])}


@api("messages", "List messages the supervisor sent or received, newest first.",
     "[{message_id, sender_email, receiver_email, text, sent_at, is_read}]",
     Param("sender_email", "string", "Only messages from this email."),
     Param("receiver_email", "string", "Only messages to this email."),
     Param("query", "string", "Only messages whose text contains this."), paged=True)
def show_messages(ctx: Ctx, sender_email: str | None, receiver_email: str | None, query: str | None
                  ) -> list[dict[str, Any]]:
    sql = (f"SELECT {MESSAGE} FROM messages WHERE (? IS NULL OR sender_email = ?) AND (? IS NULL OR "
           "receiver_email = ?) AND (? IS NULL OR lower(text) LIKE ?) ORDER BY sent_at DESC, message_id DESC")
    args = (sender_email, sender_email, receiver_email, receiver_email, query, like(query))
    return [_message_row(r) for r in ctx.paged(sql, args)]


@api("messages", "Show one message.", "{message_id, sender_email, receiver_email, text, sent_at, is_read}",
     Param("message_id", "integer", "The message.", required=True))
def show_message(ctx: Ctx, message_id: int) -> dict[str, Any]:
    return _message_row(ctx.one(f"SELECT {MESSAGE} FROM messages WHERE message_id = ?", (message_id,), "message"))


@api("messages", "Send a text message.", "{message, message_id}",
     Param("receiver_email", "string", "Who gets the message.", required=True),
     Param("message", "string", "The text to send.", required=True))
def send_message(ctx: Ctx, receiver_email: str, message: str) -> dict[str, Any]:
    if not message.strip():
        raise AppError(422, "The message is empty.")
    message_id = ctx.insert("messages", sender_email=ctx.me, receiver_email=receiver_email, text=message,
                            sent_at=ctx.now, is_read=1)
    return {"message": "Message sent.", "message_id": message_id}


@api("messages", "Delete a message.", "{message}", Param("message_id", "integer", "The message.", required=True))
def delete_message(ctx: Ctx, message_id: int) -> dict[str, Any]:
    ctx.one("SELECT message_id FROM messages WHERE message_id = ?", (message_id,), "message")
    ctx.conn.execute("DELETE FROM messages WHERE message_id = ?", (message_id,))
    return {"message": "Message deleted."}
