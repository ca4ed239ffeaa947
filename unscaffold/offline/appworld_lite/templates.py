"""Task templates: each plants what its task needs into a world, says what the right outcome is, and
carries a reference solution a student could have written.

The outcome (answer + the API calls whose effects the final state must show) is computed by reading
the world through its own APIs (`Query`), so it agrees with what a student sees. Reading only the
first page of every list gives the outcome a first-page-only student would reach; a task "needs all
pages" exactly when the two differ. What the templates are built from is in `template_kit.py`."""

from __future__ import annotations

from typing import Any

from .template_kit import Call, Outcome, Query, Ref, Template
from .world import NOTE_TAGS, RELATIONSHIPS, WorldBuilder


def _related(b: WorldBuilder, relationship: str, count: int) -> list[tuple[Any, str]]:
    return [(b.person(), relationship) for _ in range(count)]


def _other_relationship(b: WorldBuilder, relationship: str) -> str:
    return b.rng.choice([r for r in RELATIONSHIPS if r != relationship])


def _find_contact(q: Query, name: str) -> dict[str, Any]:
    return q.pages("contacts", "show_contacts", query=name)[0]


def _related_contacts(q: Query, relationship: str) -> list[dict[str, Any]]:
    return q.pages("contacts", "show_contacts", relationship=relationship)


FIND_CONTACT = '''ctoken = login("contacts")
contact = apis.contacts.show_contacts(access_token=ctoken, query={name!r})[0]
print(contact)
'''


class CountRelationship(Template):
    name = "count_relationship"
    doc_apis = (("contacts", "show_contacts"),)

    def plant(self, b: WorldBuilder) -> dict[str, Any]:
        relationship = b.rng.choice(RELATIONSHIPS)
        others = [(b.person(), _other_relationship(b, relationship)) for _ in range(b.rng.randint(1, 4))]
        b.contacts(_related(b, relationship, b.rng.randint(2, 10)) + others)
        return {"relationship": relationship}

    def task(self, p: dict[str, Any]) -> str:
        return f"How many of my contacts have the relationship '{p['relationship']}'?"

    def outcome(self, q: Query, p: dict[str, Any]) -> Outcome:
        return Outcome(answer=len(_related_contacts(q, p["relationship"])))
    answer = "len(found)"

    def solution(self, p: dict[str, Any]) -> str:
        return f'''token = login("contacts")
found = all_pages(apis.contacts.show_contacts, access_token=token, relationship={p["relationship"]!r})
print(len(found), [c["email"] for c in found])
'''


class MessageRelative(Template):
    name = "message_relative"
    doc_apis = (("contacts", "show_contacts"), ("messages", "send_message"))
    TEXTS = ("Running ten minutes late, save me a seat!", "Dinner at 7 tonight still works for me.",
             "I found your umbrella in my car.", "Can we move our call to Thursday?",
             "Congratulations on the new job!", "The keys are under the blue pot.")

    def plant(self, b: WorldBuilder) -> dict[str, Any]:
        relationship = b.rng.choice(RELATIONSHIPS)
        related = _related(b, relationship, b.rng.randint(2, 9))
        others = [(b.person(), _other_relationship(b, relationship)) for _ in range(b.rng.randint(1, 3))]
        b.contacts(related + others)
        target = b.rng.choice(related)[0]
        return {"relationship": relationship, "first_name": target.first_name, "text": b.rng.choice(self.TEXTS)}

    def task(self, p: dict[str, Any]) -> str:
        return (f"Send a text message to {p['first_name']}, one of my contacts with the relationship "
                f"'{p['relationship']}', saying exactly: {p['text']}")

    def outcome(self, q: Query, p: dict[str, Any]) -> Outcome:
        contacts = _related_contacts(q, p["relationship"])
        target = next(c for c in contacts if c["first_name"] == p["first_name"])
        return Outcome(effects=(Call.of("messages", "send_message", receiver_email=target["email"],
                                        message=p["text"]),))

    def solution(self, p: dict[str, Any]) -> str:
        return f'''token = login("contacts")
related = all_pages(apis.contacts.show_contacts, access_token=token, relationship={p["relationship"]!r})
contact = next(c for c in related if c["first_name"] == {p["first_name"]!r})
mtoken = login("messages")
sent = apis.messages.send_message(access_token=mtoken, receiver_email=contact["email"], message={p["text"]!r})
print(apis.messages.show_message(access_token=mtoken, message_id=sent["message_id"]))
'''


class SettleRequests(Template):
    name = "settle_requests"
    doc_apis = (("contacts", "show_contacts"), ("payments", "show_payment_requests"),
                ("payments", "approve_payment_request"))

    def plant(self, b: WorldBuilder) -> dict[str, Any]:
        relationship = b.rng.choice(RELATIONSHIPS)
        related = _related(b, relationship, b.rng.randint(2, 8))
        others = [(b.person(), _other_relationship(b, relationship)) for _ in range(b.rng.randint(1, 3))]
        b.contacts(related + others)
        outsiders = [p for p, _ in others] + [b.person()]
        senders = [b.rng.choice(related)[0], b.rng.choice(outsiders)]  # at least one of each kind
        senders += [b.rng.choice([p for p, _ in related] + outsiders) for _ in range(b.rng.randint(0, 6))]
        for sender in senders:
            b.request(sender.email, b.supervisor.email, b.amount(), "Shared costs", "pending")
        b.balance_cents += 100_000
        return {"relationship": relationship}

    def task(self, p: dict[str, Any]) -> str:
        return (f"Approve every pending payment request sent to me by a contact with the relationship "
                f"'{p['relationship']}', and deny every other pending payment request sent to me.")

    def outcome(self, q: Query, p: dict[str, Any]) -> Outcome:
        related = {c["email"] for c in _related_contacts(q, p["relationship"])}
        requests = q.pages("payments", "show_payment_requests", status="pending", direction="incoming")
        return Outcome(effects=tuple(
            Call.of("payments", "approve_payment_request" if r["sender_email"] in related else "deny_payment_request",
                    payment_request_id=r["payment_request_id"])
            for r in requests))

    def solution(self, p: dict[str, Any]) -> str:
        return f'''ctoken, ptoken = login("contacts"), login("payments")
related = {{c["email"] for c in all_pages(apis.contacts.show_contacts, access_token=ctoken,
                                         relationship={p["relationship"]!r})}}
pending = all_pages(apis.payments.show_payment_requests, access_token=ptoken, status="pending", direction="incoming")
for request in pending:
    rid = request["payment_request_id"]
    if request["sender_email"] in related:
        apis.payments.approve_payment_request(access_token=ptoken, payment_request_id=rid)
    else:
        apis.payments.deny_payment_request(access_token=ptoken, payment_request_id=rid)
    print(apis.payments.show_payment_request(access_token=ptoken, payment_request_id=rid))
'''


class ReceivedTotal(Template):
    name = "received_total"
    doc_apis = (("contacts", "show_contacts"), ("payments", "show_transactions"))
    answer = "total"

    def plant(self, b: WorldBuilder) -> dict[str, Any]:
        target = b.person()
        b.contact(target, b.rng.choice(RELATIONSHIPS))
        me = b.supervisor.email
        for _ in range(b.rng.randint(1, 9)):
            b.transaction(target.email, me, b.amount(), b.rng.choice(("Rent share", "Dinner", "Tickets", "Gas")))
        for _ in range(b.rng.randint(1, 2)):
            b.transaction(me, target.email, b.amount(), "Loan")
        return {"name": target.name}

    def task(self, p: dict[str, Any]) -> str:
        return (f"How much money in total have I received from {p['name']} through the payments app? "
                "Answer in dollars.")

    def outcome(self, q: Query, p: dict[str, Any]) -> Outcome:
        email = _find_contact(q, p["name"])["email"]
        received = q.pages("payments", "show_transactions", direction="received", user_email=email)
        return Outcome(answer=round(sum(t["amount"] for t in received), 2))

    def solution(self, p: dict[str, Any]) -> str:
        return FIND_CONTACT.format(name=p["name"]) + '''ptoken = login("payments")
received = all_pages(apis.payments.show_transactions, access_token=ptoken, direction="received",
                     user_email=contact["email"])
total = round(sum(t["amount"] for t in received), 2)
print(len(received), total)
'''


class ArtistPlaylist(Template):
    name = "artist_playlist"
    doc_apis = (("music", "show_song_library"), ("music", "create_playlist"), ("music", "add_song_to_playlist"))
    TITLES = ("Road Trip", "Sunday Morning", "Focus Mix", "Late Night Drive", "Kitchen Dance Party")

    def plant(self, b: WorldBuilder) -> dict[str, Any]:
        artist = b.rng.choice(b.artists())
        mine = b.rng.sample(b.songs_by(artist), b.rng.randint(2, 5))
        others = b.rng.sample(b.songs_not_by(artist), b.rng.randint(3, 11))
        b.library(mine + others)
        return {"artist": artist, "title": f"{b.rng.choice(self.TITLES)}: {artist}"}

    def task(self, p: dict[str, Any]) -> str:
        return f"Create a playlist titled '{p['title']}' with every song by {p['artist']} that is in my song library."

    def outcome(self, q: Query, p: dict[str, Any]) -> Outcome:
        songs = [s for s in q.pages("music", "show_song_library") if s["artist"] == p["artist"]]
        adds = tuple(Call.of("music", "add_song_to_playlist", playlist_id=Ref("playlist_id"), song_id=s["song_id"])
                     for s in songs)
        return Outcome(effects=(Call.of("music", "create_playlist", title=p["title"]), *adds))

    def solution(self, p: dict[str, Any]) -> str:
        return f'''token = login("music")
songs = [s for s in all_pages(apis.music.show_song_library, access_token=token) if s["artist"] == {p["artist"]!r}]
playlist_id = apis.music.create_playlist(access_token=token, title={p["title"]!r})["playlist_id"]
for song in songs:
    apis.music.add_song_to_playlist(access_token=token, playlist_id=playlist_id, song_id=song["song_id"])
print(apis.music.show_playlist(access_token=token, playlist_id=playlist_id))
'''


class PlaylistLength(Template):
    name = "playlist_length"
    doc_apis = (("music", "show_playlists"), ("music", "show_playlist"))
    answer = "total"
    TITLES = ("Gym Hits", "Rainy Day", "Study Session", "Dinner Party", "Throwbacks", "Chill Evening", "Commute",
              "Summer Nights", "Coffee Shop", "Workout Burn", "Sleepy Time", "Weekend Vibes")

    def plant(self, b: WorldBuilder) -> dict[str, Any]:
        titles = b.rng.sample(self.TITLES, b.rng.randint(2, 9))
        for title in titles:
            b.playlist(title, b.rng.sample(b.songs_not_by(None), b.rng.randint(3, 6)))
        return {"title": b.rng.choice(titles)}

    def task(self, p: dict[str, Any]) -> str:
        return f"What is the total duration, in seconds, of all the songs in my playlist '{p['title']}'?"

    def outcome(self, q: Query, p: dict[str, Any]) -> Outcome:
        playlist = next(x for x in q.pages("music", "show_playlists") if x["title"] == p["title"])
        songs = q.call("music", "show_playlist", playlist_id=playlist["playlist_id"])["songs"]
        return Outcome(answer=sum(s["duration"] for s in songs))

    def solution(self, p: dict[str, Any]) -> str:
        return f'''token = login("music")
playlist = next(x for x in all_pages(apis.music.show_playlists, access_token=token) if x["title"] == {p["title"]!r})
songs = apis.music.show_playlist(access_token=token, playlist_id=playlist["playlist_id"])["songs"]
total = sum(s["duration"] for s in songs)
print(len(songs), total)
'''


class PruneNotes(Template):
    name = "prune_notes"
    doc_apis = (("notes", "show_notes"), ("notes", "delete_note"))

    def plant(self, b: WorldBuilder) -> dict[str, Any]:
        tag = b.rng.choice(NOTE_TAGS)
        stamps = sorted(b.stamp(400) for _ in range(b.rng.randint(3, 10)))
        cut = b.rng.randint(1, len(stamps) - 1)
        cutoff = stamps[cut][:10]
        if stamps[cut - 1][:10] == cutoff:  # two notes on the cut-off day: the earlier one is kept too
            cutoff = stamps[cut - 1][:10]
        for i, stamp in enumerate(stamps):
            b.note(f"{tag.title()} note {i + 1}", f"Draft {i + 1} about {tag}.", [tag], updated_at=stamp)
        b.note(f"Old {_other_tag(b, tag)} list", "Keep this one.", [_other_tag(b, tag)], updated_at=b.stamp(500, 450))
        return {"tag": tag, "cutoff": cutoff}

    def task(self, p: dict[str, Any]) -> str:
        return (f"Delete all of my notes tagged '{p['tag']}' that were last updated before {p['cutoff']}. "
                "Keep every other note.")

    def outcome(self, q: Query, p: dict[str, Any]) -> Outcome:
        old = [n for n in q.pages("notes", "show_notes", tag=p["tag"]) if n["updated_at"] < p["cutoff"]]
        return Outcome(effects=tuple(Call.of("notes", "delete_note", note_id=n["note_id"]) for n in old))

    def solution(self, p: dict[str, Any]) -> str:
        return f'''token = login("notes")
tagged = all_pages(apis.notes.show_notes, access_token=token, tag={p["tag"]!r})
for note in [n for n in tagged if n["updated_at"] < {p["cutoff"]!r}]:
    print(apis.notes.show_note(access_token=token, note_id=note["note_id"]))
    apis.notes.delete_note(access_token=token, note_id=note["note_id"])
print(len(all_pages(apis.notes.show_notes, access_token=token, tag={p["tag"]!r})), "left")
'''


def _other_tag(b: WorldBuilder, tag: str) -> str:
    return sorted(t for t in NOTE_TAGS if t != tag)[len(tag) % (len(NOTE_TAGS) - 1)]


FACTS = (
    ("Wifi at the cabin", "password", lambda b: f"{b.password()}"),
    ("Gym locker", "locker code", lambda b: f"{b.rng.randint(1000, 9999)}-{b.rng.randint(10, 99)}"),
    ("Car details", "license plate", lambda b: f"KX{b.rng.randint(100, 999)}-{b.rng.choice('ABCDEFGH')}"),
    ("Bike lock", "combination", lambda b: f"{b.rng.randint(100, 999)}-{b.rng.randint(100, 999)}"),
    ("Storage unit", "unit number", lambda b: f"B-{b.rng.randint(100, 999)}"),
)


def _plant_fact_note(b: WorldBuilder) -> tuple[str, str]:
    """A note holding one fact (title and key returned) among a few others, at a random place in the
    newest-first list."""
    title, key, make = b.rng.choice(FACTS)
    content = f"Saved on my phone too.\n{key}: {make(b)}\nupdated by me"
    for i in range(b.rng.randint(2, 9)):
        b.note(f"Journal {i + 1}", f"Entry {i + 1}", [b.rng.choice(NOTE_TAGS)])
    b.note(title, content, [])
    return title, key


def _note_content(q: Query, title: str) -> str:
    note = next(n for n in q.pages("notes", "show_notes") if n["title"] == title)
    return q.call("notes", "show_note", note_id=note["note_id"])["content"]


READ_NOTE = '''token = login("notes")
note = next(n for n in all_pages(apis.notes.show_notes, access_token=token) if n["title"] == {title!r})
content = apis.notes.show_note(access_token=token, note_id=note["note_id"])["content"]
'''


class NoteFact(Template):
    name = "note_fact"
    doc_apis = (("notes", "show_notes"), ("notes", "show_note"))
    answer = "value"

    def plant(self, b: WorldBuilder) -> dict[str, Any]:
        title, key = _plant_fact_note(b)
        return {"title": title, "key": key}

    def task(self, p: dict[str, Any]) -> str:
        return f"What is the {p['key']} written in my note titled '{p['title']}'?"

    def outcome(self, q: Query, p: dict[str, Any]) -> Outcome:
        line = next(x for x in _note_content(q, p["title"]).splitlines() if x.startswith(p["key"] + ":"))
        return Outcome(answer=line.split(":", 1)[1].strip())

    def solution(self, p: dict[str, Any]) -> str:
        return READ_NOTE.format(title=p["title"]) + f'''print(content)
value = next(x for x in content.splitlines() if x.startswith({p["key"] + ":"!r})).split(":", 1)[1].strip()
'''


class NoteToFile(Template):
    name = "note_to_file"
    doc_apis = (("notes", "show_notes"), ("file_system", "create_file"))

    def plant(self, b: WorldBuilder) -> dict[str, Any]:
        title, _ = _plant_fact_note(b)
        path = f"~/documents/{title.lower().replace(' ', '_')}.txt"
        return {"title": title, "path": path}

    def task(self, p: dict[str, Any]) -> str:
        return f"Save the full content of my note titled '{p['title']}' as a new file at {p['path']} in my file system."

    def outcome(self, q: Query, p: dict[str, Any]) -> Outcome:
        return Outcome(effects=(Call.of("file_system", "create_file", file_path=p["path"],
                                        content=_note_content(q, p["title"])),))

    def solution(self, p: dict[str, Any]) -> str:
        return READ_NOTE.format(title=p["title"]) + f'''ftoken = login("file_system")
apis.file_system.create_file(access_token=ftoken, file_path={p["path"]!r}, content=content)
print(apis.file_system.show_file(access_token=ftoken, file_path={p["path"]!r}))
'''


class MoveFiles(Template):
    name = "move_files"
    doc_apis = (("file_system", "show_directory"), ("file_system", "move_file"))
    STEMS = ("invoice", "report", "scan", "ticket", "receipt", "notes", "photo", "draft", "export", "manual",
             "slides", "statement", "contract", "itinerary")

    def plant(self, b: WorldBuilder) -> dict[str, Any]:
        ext, other = b.rng.sample(("pdf", "csv", "docx", "png"), 2)
        stems = b.rng.sample(self.STEMS, b.rng.randint(4, 12))
        targets = b.rng.randint(2, min(5, len(stems) - 1))
        for i, stem in enumerate(stems):
            b.file(f"~/downloads/{stem}_{b.rng.randint(1, 99)}.{ext if i < targets else other}", f"<{stem}>")
        b.file(f"~/downloads/old/{stems[0]}_archive.{ext}", "<archive>")
        folder = b.rng.choice(("papers", "filed", "keep", "archive_2024"))
        return {"ext": ext, "src": "~/downloads", "dst": f"~/documents/{folder}"}

    def task(self, p: dict[str, Any]) -> str:
        return (f"Move every .{p['ext']} file that is directly inside {p['src']} (not in its sub-folders) into "
                f"{p['dst']}, keeping each file name.")

    def outcome(self, q: Query, p: dict[str, Any]) -> Outcome:
        entries = q.pages("file_system", "show_directory", directory_path=p["src"])
        return Outcome(effects=tuple(
            Call.of("file_system", "move_file", source_file_path=e["path"],
                    destination_file_path=f"{p['dst']}/{e['name']}")
            for e in entries if e["type"] == "file" and e["name"].endswith("." + p["ext"])))

    def solution(self, p: dict[str, Any]) -> str:
        return f'''token = login("file_system")
entries = all_pages(apis.file_system.show_directory, access_token=token, directory_path={p["src"]!r})
for entry in [e for e in entries if e["type"] == "file" and e["name"].endswith({"." + p["ext"]!r})]:
    target = {p["dst"]!r} + "/" + entry["name"]
    apis.file_system.move_file(access_token=token, source_file_path=entry["path"], destination_file_path=target)
    print(apis.file_system.show_file(access_token=token, file_path=target))
'''


class UpdatePhone(Template):
    name = "update_phone"
    doc_apis = (("contacts", "show_contacts"), ("contacts", "update_contact"))

    def plant(self, b: WorldBuilder) -> dict[str, Any]:
        people = [(b.person(), b.rng.choice(RELATIONSHIPS)) for _ in range(b.rng.randint(2, 9))]
        b.contacts(people)
        target = b.rng.choice(people)[0]
        return {"name": target.name, "phone": f"555-{b.rng.randint(1000, 9999)}"}

    def task(self, p: dict[str, Any]) -> str:
        return f"{p['name']} has a new phone number: {p['phone']}. Update their entry in my contacts."

    def outcome(self, q: Query, p: dict[str, Any]) -> Outcome:
        contact = next(c for c in q.pages("contacts", "show_contacts")
                       if f"{c['first_name']} {c['last_name']}" == p["name"])
        return Outcome(effects=(Call.of("contacts", "update_contact", contact_id=contact["contact_id"],
                                        phone_number=p["phone"]),))

    def solution(self, p: dict[str, Any]) -> str:
        return f'''token = login("contacts")
contacts = all_pages(apis.contacts.show_contacts, access_token=token)
contact = next(c for c in contacts if c["first_name"] + " " + c["last_name"] == {p["name"]!r})
apis.contacts.update_contact(access_token=token, contact_id=contact["contact_id"], phone_number={p["phone"]!r})
print(apis.contacts.show_contact(access_token=token, contact_id=contact["contact_id"]))
'''


class UnreadFrom(Template):
    name = "unread_from"
    doc_apis = (("contacts", "show_contacts"), ("messages", "show_messages"))
    answer = "unread"
    TEXTS = ("Are you free this weekend?", "Check this out!", "Call me back please.", "Did you get my email?",
             "Photos from the trip are up.", "Where should we meet?", "Happy Friday!", "Quick question for you.")

    def plant(self, b: WorldBuilder) -> dict[str, Any]:
        target = b.person()
        b.contact(target, b.rng.choice(RELATIONSHIPS))
        count = b.rng.randint(2, 10)
        unread = set(b.rng.sample(range(count), b.rng.randint(1, count)))
        for i in range(count):
            b.message(target.email, b.supervisor.email, b.rng.choice(self.TEXTS), is_read=i not in unread)
        b.message(b.supervisor.email, target.email, "On my way.")
        return {"name": target.name}

    def task(self, p: dict[str, Any]) -> str:
        return f"How many unread messages from {p['name']} do I have?"

    def outcome(self, q: Query, p: dict[str, Any]) -> Outcome:
        email = _find_contact(q, p["name"])["email"]
        return Outcome(answer=sum(not m["is_read"] for m in q.pages("messages", "show_messages", sender_email=email)))

    def solution(self, p: dict[str, Any]) -> str:
        return FIND_CONTACT.format(name=p["name"]) + '''mtoken = login("messages")
received = all_pages(apis.messages.show_messages, access_token=mtoken, sender_email=contact["email"])
unread = sum(not m["is_read"] for m in received)
print(len(received), unread)
'''


class RequestMoney(Template):
    name = "request_money"
    doc_apis = (("contacts", "show_contacts"), ("payments", "create_payment_request"))
    REASONS = ("Lake house weekend", "Pizza night", "Concert tickets", "Team lunch", "Birthday gift pool")

    def plant(self, b: WorldBuilder) -> dict[str, Any]:
        relationship = b.rng.choice(RELATIONSHIPS)
        others = [(b.person(), _other_relationship(b, relationship)) for _ in range(b.rng.randint(1, 3))]
        b.contacts(_related(b, relationship, b.rng.randint(2, 9)) + others)
        amount = b.rng.randint(20, 120) + b.rng.choice((0, 0.5))
        return {"relationship": relationship, "amount": amount, "description": b.rng.choice(self.REASONS)}

    def task(self, p: dict[str, Any]) -> str:
        return (f"Send a payment request of ${p['amount']:.2f} with the description '{p['description']}' to each "
                f"of my contacts with the relationship '{p['relationship']}'.")

    def outcome(self, q: Query, p: dict[str, Any]) -> Outcome:
        contacts = _related_contacts(q, p["relationship"])
        return Outcome(effects=tuple(
            Call.of("payments", "create_payment_request", user_email=c["email"], amount=p["amount"],
                    description=p["description"])
            for c in contacts))

    def solution(self, p: dict[str, Any]) -> str:
        return f'''ctoken, ptoken = login("contacts"), login("payments")
related = all_pages(apis.contacts.show_contacts, access_token=ctoken, relationship={p["relationship"]!r})
for contact in related:
    made = apis.payments.create_payment_request(access_token=ptoken, user_email=contact["email"],
                                                amount={p["amount"]!r}, description={p["description"]!r})
    print(apis.payments.show_payment_request(access_token=ptoken, payment_request_id=made["payment_request_id"]))
'''


TEMPLATES: tuple[Template, ...] = (
    CountRelationship(), MessageRelative(), SettleRequests(), ReceivedTotal(), ArtistPlaylist(), PlaylistLength(),
    PruneNotes(), NoteFact(), NoteToFile(), MoveFiles(), UpdatePhone(), UnreadFrom(), RequestMoney(),
)
