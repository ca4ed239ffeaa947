"""Deterministic worlds: a supervisor, the people around them and everyday app data, written to SQLite.

Every task has its own world, built from a seed, so a trial can be set up again byte for byte. A task
template plants what its task needs on top of the everyday noise (see `templates.py`)."""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from . import apps
from .apis import STATE_DIR

NOW = datetime(2024, 6, 15, 12, 0, 0)
LOGIN_APPS = ("contacts", "messages", "payments", "music", "notes", "file_system")
RELATIONSHIPS = ("friend", "coworker", "family", "neighbor", "roommate")
FIRST_NAMES = (
    "Aaron Abigail Adrian Alice Amara Andre Anika Arjun Beatriz Bianca Caleb Camila Chloe Damian Daniela Derek "
    "Elena Elias Emeka Esther Felix Fiona Gabriel Grace Hannah Hugo Imani Isaac Ivy Jasper Jonah Julia Kai Kavya "
    "Laila Leon Lucia Malik Maya Mateo Nadia Nico Noor Oliver Olivia Omar Paloma Priya Quinn Rafael Rosa Samir "
    "Sofia Tariq Tessa Uma Victor Wren Xavier Yara Zane"
).split()
LAST_NAMES = (
    "Abbott Alvarez Bauer Bennett Castillo Chen Coleman Dawson Diaz Ellis Ferreira Fischer Garcia Gupta Hale "
    "Hansen Ibrahim Ito Jensen Kaur Kim Kowalski Larsen Lopez Mendes Meyer Moreau Nakamura Nguyen Novak Okafor "
    "Olsen Patel Petrov Quinlan Ramos Reyes Rossi Santos Schmidt Silva Singh Sokolov Tanaka Torres Usman Vargas "
    "Volkov Walsh Weber Xu Yamada Young Zhang Ziegler"
).split()
ARTISTS = {
    "Velvet Harbor": "indie", "Nova Quartet": "jazz", "The Paper Kites Club": "folk", "Ruby Static": "rock",
    "Lumen Drive": "electronic", "Marisol Vega": "pop", "Cedar & Stone": "folk", "DJ Parallax": "electronic",
    "Harlow Grace": "pop", "Iron Meridian": "rock",
}
SONG_WORDS = ("Midnight Golden Paper Electric Silent Wild Neon Hollow Crystal Summer Distant Broken Quiet "
              "Burning Silver Endless Lost Bright").split()
SONG_NOUNS = ("Rivers Lights Hearts Roads Dreams Waves Skies Fires Echoes Gardens Mirrors Stars Shadows Trains "
              "Letters Oceans").split()
NOTE_TAGS = ("shopping", "ideas", "meeting", "travel", "recipes", "work", "health", "books")
PASSWORD_WORDS = ("amber cobalt falcon juniper lantern maple orbit pepper quartz river sable tundra violet willow "
                  "zephyr harbor").split()


@dataclass(frozen=True)
class Person:
    first_name: str
    last_name: str
    email: str
    phone_number: str

    @property
    def name(self) -> str:
        return f"{self.first_name} {self.last_name}"


@dataclass
class World:
    """All rows of one world, ready to be written; ids are explicit so the file is reproducible."""

    supervisor: Person
    secret: str
    passwords: dict[str, str]
    balance_cents: int
    rows: dict[str, list[dict[str, Any]]]

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            path.unlink()
        memory, conn = sqlite3.connect(":memory:"), sqlite3.connect(str(path))
        try:  # built in memory, written in one go: one sync instead of one per table
            self.fill(memory)
            conn.execute("PRAGMA synchronous = OFF")
            memory.backup(conn)
        finally:
            memory.close()
            conn.close()

    def fill(self, conn: sqlite3.Connection) -> None:
        """Create the schema and every row in an empty database."""
        conn.executescript(apps.SCHEMA)
        meta = {"now": NOW.isoformat(), "secret": self.secret, "tokens_issued": "0"}
        conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", sorted(meta.items()))
        s = self.supervisor
        conn.execute("INSERT INTO profile VALUES (1, ?, ?, ?, ?)", (s.first_name, s.last_name, s.email,
                                                                    s.phone_number))
        conn.executemany("INSERT INTO accounts VALUES (?, ?)", sorted(self.passwords.items()))
        conn.execute("INSERT INTO wallet VALUES (1, ?)", (self.balance_cents,))
        for table, rows in self.rows.items():
            for row in rows:
                cols = ", ".join(row)
                conn.execute(f"INSERT INTO {table} ({cols}) VALUES ({', '.join('?' for _ in row)})",
                             tuple(row.values()))
        conn.commit()

    def supervisor_dict(self) -> dict[str, str]:
        s = self.supervisor
        return {"first_name": s.first_name, "last_name": s.last_name, "email": s.email,
                "phone_number": s.phone_number}


ID_COLUMNS = {"contacts": "contact_id", "messages": "message_id", "transactions": "transaction_id",
              "payment_requests": "payment_request_id", "songs": "song_id", "playlists": "playlist_id",
              "notes": "note_id", "files": "file_id"}
TABLES = ("contacts", "messages", "transactions", "payment_requests", "songs", "library", "playlists",
          "playlist_songs", "notes", "files")


@dataclass
class WorldBuilder:
    """Builds one world from a random generator; templates call its helpers to plant their data."""

    rng: random.Random
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {t: [] for t in TABLES})
    balance_cents: int = 0

    def __post_init__(self) -> None:
        firsts = self.rng.sample(FIRST_NAMES, 45)
        lasts = self.rng.sample(LAST_NAMES, 45)
        self._people = [self._make_person(f, last, i) for i, (f, last) in enumerate(zip(firsts, lasts, strict=True))]
        self.supervisor = self._people.pop()
        self.secret = f"{self.rng.getrandbits(128):032x}"
        self.passwords = {app: self.password() for app in LOGIN_APPS}
        self.balance_cents = self.rng.randint(2000, 4000) * 100
        self._stamps: set[str] = set()
        self._contacts: list[tuple[Person, str]] = []
        self._songs_by_artist: dict[str, list[int]] = {}
        self._add_catalogue()

    def _make_person(self, first: str, last: str, index: int) -> Person:
        domain = self.rng.choice(("gmail.com", "outlook.com", "proton.me", "fastmail.com"))
        return Person(first, last, f"{first.lower()}.{last.lower()}@{domain}", f"555-{1000 + index * 37 % 9000:04d}")

    def password(self) -> str:
        return f"{self.rng.choice(PASSWORD_WORDS)}-{self.rng.choice(PASSWORD_WORDS)}-{self.rng.randint(10, 99)}"

    def person(self) -> Person:
        """Someone not used yet in this world."""
        return self._people.pop()

    def stamp(self, max_days: int = 400, min_days: int = 0) -> str:
        """A distinct past moment, so that newest-first lists have one order."""
        while True:
            moment = NOW - timedelta(days=self.rng.uniform(min_days, max_days))
            text = moment.replace(microsecond=0).isoformat()
            if text not in self._stamps:
                self._stamps.add(text)
                return text

    def add(self, table: str, **row: Any) -> int:
        id_column = ID_COLUMNS.get(table)
        if id_column:
            row = {id_column: len(self.rows[table]) + 1, **row}
        self.rows[table].append(row)
        return int(row[id_column]) if id_column else 0

    # ------------------------------------------------------------ entities

    def contact(self, person: Person, relationship: str) -> None:
        """Contacts are listed by id: they get their ids in a random order at `build`, so planted ones land
        anywhere in the list."""
        self._contacts.append((person, relationship))

    def contacts(self, people: list[tuple[Person, str]]) -> None:
        for person, relationship in people:
            self.contact(person, relationship)

    def artists(self) -> list[str]:
        return sorted(self._songs_by_artist)

    def message(self, sender: str, receiver: str, text: str, is_read: bool = True) -> int:
        return self.add("messages", sender_email=sender, receiver_email=receiver, text=text, sent_at=self.stamp(120),
                        is_read=int(is_read))

    def transaction(self, sender: str, receiver: str, amount_cents: int, description: str) -> int:
        return self.add("transactions", sender_email=sender, receiver_email=receiver, amount_cents=amount_cents,
                        description=description, created_at=self.stamp(300))

    def request(self, sender: str, receiver: str, amount_cents: int, description: str, status: str) -> int:
        created = self.stamp(90)
        return self.add("payment_requests", sender_email=sender, receiver_email=receiver, amount_cents=amount_cents,
                        description=description, status=status, created_at=created, updated_at=created)

    def note(self, title: str, content: str, tags: list[str], updated_at: str | None = None) -> int:
        updated = updated_at or self.stamp(400)
        return self.add("notes", title=title, content=content, tags=",".join(tags), created_at=updated,
                        updated_at=updated)

    def file(self, path: str, content: str) -> int:
        stamp = self.stamp(500)
        return self.add("files", path=path, content=content, created_at=stamp, updated_at=stamp)

    def playlist(self, title: str, song_ids: list[int]) -> int:
        playlist_id = self.add("playlists", title=title, created_at=self.stamp(700))
        for song_id in sorted(set(song_ids)):
            self.add("playlist_songs", playlist_id=playlist_id, song_id=song_id)
        return playlist_id

    def library(self, song_ids: list[int]) -> None:
        for song_id in song_ids:
            self.add("library", song_id=song_id, added_at=self.stamp(600))

    def songs_by(self, artist: str) -> list[int]:
        return list(self._songs_by_artist[artist])

    def songs_not_by(self, artist: str | None) -> list[int]:
        return [s for a, ids in self._songs_by_artist.items() if a != artist for s in ids]

    def amount(self, low: int = 5, high: int = 90) -> int:
        return self.rng.randint(low * 100, high * 100) // 25 * 25

    def _add_catalogue(self) -> None:
        titles = self.rng.sample([f"{w} {n}" for w in SONG_WORDS for n in SONG_NOUNS], 5 * len(ARTISTS))
        for i, (artist, genre) in enumerate(ARTISTS.items()):
            for title in titles[i * 5:(i + 1) * 5]:
                song_id = self.add("songs", title=title, artist=artist, genre=genre,
                                   duration=self.rng.randint(140, 330))
                self._songs_by_artist.setdefault(artist, []).append(song_id)

    # ------------------------------------------------------------ everyday noise

    def noise(self, *, contacts: bool = True, money: bool = True, notes: bool = True, files: bool = True,
              messages: bool = True) -> list[Person]:
        """Everyday data no task is about; returns the contacts it added (for templates to reuse)."""
        rng, me = self.rng, self.supervisor.email
        known = [self.person() for _ in range(rng.randint(3, 6))] if contacts else []
        if contacts:
            self.contacts([(p, rng.choice(RELATIONSHIPS)) for p in known])
        strangers = [self.person() for _ in range(2)]
        others = known + strangers
        if messages:
            for _ in range(rng.randint(2, 6)):
                p = rng.choice(others)
                if rng.random() < 0.5:
                    self.message(p.email, me, rng.choice(SMALL_TALK), is_read=rng.random() < 0.7)
                else:
                    self.message(me, p.email, rng.choice(SMALL_TALK))
        if money:
            for _ in range(rng.randint(2, 6)):
                p = rng.choice(others)
                sender, receiver = (me, p.email) if rng.random() < 0.5 else (p.email, me)
                self.transaction(sender, receiver, self.amount(), rng.choice(PAYMENT_NOTES))
            for _ in range(rng.randint(1, 3)):
                p = rng.choice(others)
                if rng.random() < 0.5:
                    self.request(me, p.email, self.amount(), rng.choice(PAYMENT_NOTES), "pending")
                else:
                    self.request(p.email, me, self.amount(), rng.choice(PAYMENT_NOTES),
                                 rng.choice(("approved", "denied")))
        if notes:
            for title, content in rng.sample(NOTE_NOISE, rng.randint(2, 4)):
                self.note(title, content, rng.sample(NOTE_TAGS, rng.randint(0, 2)))
        if files:
            for path, content in rng.sample(FILE_NOISE, rng.randint(3, 5)):
                self.file(path, content)
        return known

    def build(self) -> World:
        self.rng.shuffle(self._contacts)
        for person, relationship in self._contacts:
            self.add("contacts", first_name=person.first_name, last_name=person.last_name, email=person.email,
                     phone_number=person.phone_number, relationship=relationship, created_at=self.stamp(900))
        self._contacts.clear()
        return World(supervisor=self.supervisor, secret=self.secret, passwords=dict(self.passwords),
                     balance_cents=self.balance_cents, rows={t: [dict(r) for r in rs] for t, rs in self.rows.items()})


SMALL_TALK = ("See you at the gym tomorrow?", "Thanks for the book!", "Can you send me the photos?",
              "Happy birthday!!", "Running late, sorry.", "Did you watch the game?", "Lunch on Friday?",
              "The package arrived.", "Call me when you can.", "Great seeing you today.")
PAYMENT_NOTES = ("Dinner", "Concert tickets", "Groceries", "Taxi", "Coffee", "Utilities", "Birthday gift",
                 "Movie night", "Gas money", "Brunch")
NOTE_NOISE = (
    ("Weekend plans", "Saturday: farmers market\nSunday: hike at the ridge"),
    ("Book list", "The Overstory\nPiranesi\nA Gentleman in Moscow"),
    ("Team retro", "Went well: releases\nTo improve: code review turnaround"),
    ("Garden", "Water tomatoes twice a week\nRepot the basil"),
    ("Podcast ideas", "Episode on urban cycling\nInterview a local baker"),
    ("Gift ideas", "Scarf for Mom\nHeadphones for Dad"),
    ("Recipe: pancakes", "2 cups flour\n2 eggs\n1.5 cups milk"),
)
FILE_NOISE = (
    ("~/documents/resume.txt", "Experience: 6 years in logistics"),
    ("~/documents/budget.csv", "month,spent\n2024-04,1840\n2024-05,1912"),
    ("~/photos/beach.jpg", "<jpeg data>"),
    ("~/photos/birthday.jpg", "<jpeg data>"),
    ("~/music/playlist_export.txt", "Midnight Rivers\nNeon Echoes"),
    ("~/documents/lease.txt", "Lease ends 2025-03-31"),
    ("~/projects/todo.txt", "finish slides\nbook flights"),
)


def install_client(workspace: Path, task: dict[str, Any] | None = None) -> Path:
    """Put the client (`apis.py`) and, without gold, the task's description (`.apps/task.json`) into a
    workspace; return its `.apps/`. The world itself never goes there: its server holds it (`server.py`)."""
    state = workspace / STATE_DIR
    state.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(Path(__file__).resolve().parent / "apis.py", workspace / "apis.py")
    if task is not None:
        (state / "task.json").write_text(json.dumps(task, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return state


def demo_world(seed: str = "demo") -> World:
    """A small world that belongs to no task: for the h* tools' examples and for trying the apps out."""
    builder = WorldBuilder(random.Random(seed))
    known = builder.noise()
    for person in [builder.person() for _ in range(6)] + known[:1]:
        builder.contact(person, "friend")
    builder.library(builder.songs_not_by(None)[:7])
    builder.playlist("Morning Run", builder.songs_not_by(None)[3:6])
    return builder.build()

