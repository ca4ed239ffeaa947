"""The contacts app: the supervisor's address book."""

from __future__ import annotations

from typing import Any

from ..appkit import AppError, Ctx, Param, api, like

CONTACT = "contact_id, first_name, last_name, email, phone_number, relationship"


@api("contacts", "List contacts, optionally only those matching a name or email query or a relationship.",
     "[{contact_id, first_name, last_name, email, phone_number, relationship}]",
     Param("query", "string", "Part of a name (first, last or full) or an email."),
     Param("relationship", "string", "e.g. friend, coworker, family, neighbor, roommate."), paged=True)
def show_contacts(ctx: Ctx, query: str | None, relationship: str | None) -> list[dict[str, Any]]:
    sql = (f"SELECT {CONTACT} FROM contacts WHERE (? IS NULL OR lower(first_name || ' ' || last_name) LIKE ? "
           "OR lower(email) LIKE ?) AND (? IS NULL OR relationship = ?) ORDER BY contact_id")
    return ctx.paged(sql, (query, like(query), like(query), relationship, relationship))


@api("contacts", "Show one contact.", "{contact_id, first_name, last_name, email, phone_number, relationship, "
     "created_at}", Param("contact_id", "integer", "The contact.", required=True))
def show_contact(ctx: Ctx, contact_id: int) -> dict[str, Any]:
    return ctx.one(f"SELECT {CONTACT}, created_at FROM contacts WHERE contact_id = ?", (contact_id,), "contact")


CONTACT_FIELDS = (
    Param("first_name", "string", "First name."),
    Param("last_name", "string", "Last name."),
    Param("email", "string", "Email address."),
    Param("phone_number", "string", "Phone number, e.g. 555-0134."),
    Param("relationship", "string", "e.g. friend, coworker, family, neighbor, roommate."),
)


@api("contacts", "Add a contact.", "{message, contact_id}",
     *(Param(p.name, p.type, p.description, required=p.name in ("first_name", "last_name", "email"))
       for p in CONTACT_FIELDS))
def add_contact(ctx: Ctx, first_name: str, last_name: str, email: str, phone_number: str | None,
                relationship: str | None) -> dict[str, Any]:
    contact_id = ctx.insert("contacts", first_name=first_name, last_name=last_name, email=email,
                            phone_number=phone_number, relationship=relationship, created_at=ctx.now)
    return {"message": "Contact added.", "contact_id": contact_id}


@api("contacts", "Change fields of a contact; only the fields given change.", "{message}",
     Param("contact_id", "integer", "The contact.", required=True), *CONTACT_FIELDS)
def update_contact(ctx: Ctx, contact_id: int, **fields: Any) -> dict[str, Any]:
    ctx.one("SELECT contact_id FROM contacts WHERE contact_id = ?", (contact_id,), "contact")
    changes = {k: v for k, v in fields.items() if v is not None}
    if not changes:
        raise AppError(422, "Give at least one field to change.")
    for key, value in changes.items():
        ctx.conn.execute(f"UPDATE contacts SET {key} = ? WHERE contact_id = ?", (value, contact_id))
    return {"message": "Contact updated."}


@api("contacts", "Delete a contact.", "{message}", Param("contact_id", "integer", "The contact.", required=True))
def delete_contact(ctx: Ctx, contact_id: int) -> dict[str, Any]:
    ctx.one("SELECT contact_id FROM contacts WHERE contact_id = ?", (contact_id,), "contact")
    ctx.conn.execute("DELETE FROM contacts WHERE contact_id = ?", (contact_id,))
    return {"message": "Contact deleted."}
