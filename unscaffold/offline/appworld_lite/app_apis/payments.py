"""The payments app: wallet balance, transfers and payment requests (amounts kept in cents)."""

from __future__ import annotations

from typing import Any

from ..appkit import AppError, Ctx, Param, api, cents, dollars

TRANSACTION = "transaction_id, sender_email, receiver_email, amount_cents, description, created_at"
REQUEST = ("payment_request_id, sender_email, receiver_email, amount_cents, description, status, created_at, "
           "updated_at")
LISTED = {"transactions": (TRANSACTION, "transaction_id"), "payment_requests": (REQUEST, "payment_request_id")}


def _money_row(row: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in row.items() if k != "amount_cents"}
    out["amount"] = dollars(row["amount_cents"])
    return out


def _money_page(ctx: Ctx, table: str, direction: str | None, sides: dict[str, str], test: str,
                args: tuple[Any, ...]) -> list[dict[str, Any]]:
    """A page of transfers or requests, newest first, in dollars: those with the supervisor on the `direction`
    side (any side when omitted; 422 for another direction) that pass `test` (its parameters `args`)."""
    if direction is None:
        mine = "? IS NOT NULL"
    elif direction in sides:
        mine = f"{sides[direction]} = ?"
    else:
        raise AppError(422, "direction must be " + " or ".join(f"'{d}'" for d in sides) + ".")
    columns, key = LISTED[table]
    sql = f"SELECT {columns} FROM {table} WHERE {mine} AND {test} ORDER BY created_at DESC, {key} DESC"
    return [_money_row(r) for r in ctx.paged(sql, (ctx.me, *args))]


def _pay(ctx: Ctx, receiver_email: str, amount_cents: int, description: str) -> int:
    balance = ctx.one("SELECT balance_cents FROM wallet", (), "wallet")["balance_cents"]
    if amount_cents > balance:
        raise AppError(422, "The balance is too low for this payment.")
    ctx.conn.execute("UPDATE wallet SET balance_cents = ?", (balance - amount_cents,))
    return ctx.insert("transactions", sender_email=ctx.me, receiver_email=receiver_email, amount_cents=amount_cents,
                      description=description, created_at=ctx.now)


@api("payments", "Show the wallet balance in dollars.", "{balance}")
def show_balance(ctx: Ctx) -> dict[str, Any]:
    return {"balance": dollars(ctx.one("SELECT balance_cents FROM wallet", (), "wallet")["balance_cents"])}


@api("payments", "List money transfers, newest first.",
     "[{transaction_id, sender_email, receiver_email, amount, description, created_at}]",
     Param("direction", "string", "sent or received; both when omitted."),
     Param("user_email", "string", "Only transfers with this person."), paged=True)
def show_transactions(ctx: Ctx, direction: str | None, user_email: str | None) -> list[dict[str, Any]]:
    return _money_page(ctx, "transactions", direction, {"sent": "sender_email", "received": "receiver_email"},
                       "(? IS NULL OR sender_email = ? OR receiver_email = ?)", (user_email, user_email, user_email))


@api("payments", "Show one money transfer.",
     "{transaction_id, sender_email, receiver_email, amount, description, created_at}",
     Param("transaction_id", "integer", "The transfer.", required=True))
def show_transaction(ctx: Ctx, transaction_id: int) -> dict[str, Any]:
    return _money_row(ctx.one(f"SELECT {TRANSACTION} FROM transactions WHERE transaction_id = ?", (transaction_id,),
                              "transaction"))


@api("payments", "Send money from the wallet.", "{message, transaction_id}",
     Param("receiver_email", "string", "Who gets the money.", required=True),
     Param("amount", "number", "Dollars, more than 0.", required=True),
     Param("description", "string", "What it is for.", default=""))
def send_money(ctx: Ctx, receiver_email: str, amount: float, description: str) -> dict[str, Any]:
    return {"message": "Money sent.", "transaction_id": _pay(ctx, receiver_email, cents(amount), description)}


@api("payments", "List payment requests, newest first. Incoming requests ask the supervisor to pay; outgoing "
     "ones ask someone else to pay the supervisor.",
     "[{payment_request_id, sender_email, receiver_email, amount, description, status, created_at, updated_at}]",
     Param("status", "string", "pending, approved or denied."),
     Param("direction", "string", "incoming or outgoing; both when omitted."), paged=True)
def show_payment_requests(ctx: Ctx, status: str | None, direction: str | None) -> list[dict[str, Any]]:
    return _money_page(ctx, "payment_requests", direction, {"incoming": "receiver_email", "outgoing": "sender_email"},
                       "(? IS NULL OR status = ?)", (status, status))


@api("payments", "Show one payment request.",
     "{payment_request_id, sender_email, receiver_email, amount, description, status, created_at, updated_at}",
     Param("payment_request_id", "integer", "The request.", required=True))
def show_payment_request(ctx: Ctx, payment_request_id: int) -> dict[str, Any]:
    return _money_row(_request(ctx, payment_request_id))


def _request(ctx: Ctx, payment_request_id: int) -> dict[str, Any]:
    return ctx.one(f"SELECT {REQUEST} FROM payment_requests WHERE payment_request_id = ?", (payment_request_id,),
                   "payment request")


@api("payments", "Ask someone to pay the supervisor.", "{message, payment_request_id}",
     Param("user_email", "string", "Who is asked to pay.", required=True),
     Param("amount", "number", "Dollars, more than 0.", required=True),
     Param("description", "string", "What it is for.", default=""))
def create_payment_request(ctx: Ctx, user_email: str, amount: float, description: str) -> dict[str, Any]:
    request_id = ctx.insert("payment_requests", sender_email=ctx.me, receiver_email=user_email,
                            amount_cents=cents(amount), description=description, status="pending",
                            created_at=ctx.now, updated_at=ctx.now)
    return {"message": "Payment request sent.", "payment_request_id": request_id}


def _pending_incoming(ctx: Ctx, payment_request_id: int) -> dict[str, Any]:
    row = _request(ctx, payment_request_id)
    if row["receiver_email"] != ctx.me:
        raise AppError(422, "Only requests sent to the supervisor can be approved or denied.")
    if row["status"] != "pending":
        raise AppError(409, f"The request is already {row['status']}.")
    return row


@api("payments", "Approve an incoming pending payment request: the money is sent now.",
     "{message, transaction_id}", Param("payment_request_id", "integer", "The request.", required=True))
def approve_payment_request(ctx: Ctx, payment_request_id: int) -> dict[str, Any]:
    row = _pending_incoming(ctx, payment_request_id)
    transaction_id = _pay(ctx, row["sender_email"], row["amount_cents"], row["description"])
    ctx.conn.execute("UPDATE payment_requests SET status = 'approved', updated_at = ? WHERE payment_request_id = ?",
                     (ctx.now, payment_request_id))
    return {"message": "Request approved and paid.", "transaction_id": transaction_id}


@api("payments", "Deny an incoming pending payment request.", "{message}",
     Param("payment_request_id", "integer", "The request.", required=True))
def deny_payment_request(ctx: Ctx, payment_request_id: int) -> dict[str, Any]:
    _pending_incoming(ctx, payment_request_id)
    ctx.conn.execute("UPDATE payment_requests SET status = 'denied', updated_at = ? WHERE payment_request_id = ?",
                     (ctx.now, payment_request_id))
    return {"message": "Request denied."}
