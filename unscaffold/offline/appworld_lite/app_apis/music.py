"""The music app: the song catalogue, the supervisor's library and playlists."""

from __future__ import annotations

from typing import Any

from ..appkit import AppError, Ctx, Param, api, like

SONG = "song_id, title, artist, genre, duration"


@api("music", "Search the song catalogue.", "[{song_id, title, artist, genre, duration}] (duration in seconds)",
     Param("query", "string", "Part of a title."), Param("artist", "string", "Exact artist name."),
     Param("genre", "string", "Exact genre."), paged=True)
def search_songs(ctx: Ctx, query: str | None, artist: str | None, genre: str | None) -> list[dict[str, Any]]:
    sql = (f"SELECT {SONG} FROM songs WHERE (? IS NULL OR lower(title) LIKE ?) AND (? IS NULL OR artist = ?) "
           "AND (? IS NULL OR genre = ?) ORDER BY song_id")
    return ctx.paged(sql, (query, like(query), artist, artist, genre, genre))


@api("music", "Show one song.", "{song_id, title, artist, genre, duration} (duration in seconds)",
     Param("song_id", "integer", "The song.", required=True))
def show_song(ctx: Ctx, song_id: int) -> dict[str, Any]:
    return ctx.one(f"SELECT {SONG} FROM songs WHERE song_id = ?", (song_id,), "song")


@api("music", "List the songs in the supervisor's library, most recently added first.",
     "[{song_id, title, artist, genre, duration, added_at}]", paged=True)
def show_song_library(ctx: Ctx) -> list[dict[str, Any]]:
    sql = ("SELECT s.song_id, s.title, s.artist, s.genre, s.duration, l.added_at FROM library l JOIN songs s "
           "ON s.song_id = l.song_id ORDER BY l.added_at DESC, s.song_id DESC")
    return ctx.paged(sql)


@api("music", "List the supervisor's playlists.", "[{playlist_id, title, song_count, created_at}]", paged=True)
def show_playlists(ctx: Ctx) -> list[dict[str, Any]]:
    sql = ("SELECT p.playlist_id, p.title, (SELECT count(*) FROM playlist_songs x WHERE x.playlist_id = "
           "p.playlist_id) AS song_count, p.created_at FROM playlists p ORDER BY p.playlist_id")
    return ctx.paged(sql)


@api("music", "Show one playlist with all of its songs.",
     "{playlist_id, title, created_at, songs: [{song_id, title, artist, genre, duration}]}",
     Param("playlist_id", "integer", "The playlist.", required=True))
def show_playlist(ctx: Ctx, playlist_id: int) -> dict[str, Any]:
    row = ctx.one("SELECT playlist_id, title, created_at FROM playlists WHERE playlist_id = ?", (playlist_id,),
                  "playlist")
    songs = ctx.rows(f"SELECT {', '.join('s.' + c for c in SONG.split(', '))} FROM playlist_songs x JOIN songs s "
                     "ON s.song_id = x.song_id WHERE x.playlist_id = ? ORDER BY s.song_id", (playlist_id,))
    return {**row, "songs": songs}


@api("music", "Create an empty playlist.", "{message, playlist_id}",
     Param("title", "string", "The playlist's title.", required=True))
def create_playlist(ctx: Ctx, title: str) -> dict[str, Any]:
    return {"message": "Playlist created.", "playlist_id": ctx.insert("playlists", title=title, created_at=ctx.now)}


def _song_in(ctx: Ctx, playlist_id: int, song_id: int) -> bool:
    ctx.one("SELECT playlist_id FROM playlists WHERE playlist_id = ?", (playlist_id,), "playlist")
    ctx.one("SELECT song_id FROM songs WHERE song_id = ?", (song_id,), "song")
    return bool(ctx.rows("SELECT 1 FROM playlist_songs WHERE playlist_id = ? AND song_id = ?", (playlist_id, song_id)))


@api("music", "Add a song to a playlist.", "{message}",
     Param("playlist_id", "integer", "The playlist.", required=True),
     Param("song_id", "integer", "The song.", required=True))
def add_song_to_playlist(ctx: Ctx, playlist_id: int, song_id: int) -> dict[str, Any]:
    if _song_in(ctx, playlist_id, song_id):
        raise AppError(409, "The song is already in the playlist.")
    ctx.insert("playlist_songs", playlist_id=playlist_id, song_id=song_id)
    return {"message": "Song added to the playlist."}


@api("music", "Remove a song from a playlist.", "{message}",
     Param("playlist_id", "integer", "The playlist.", required=True),
     Param("song_id", "integer", "The song.", required=True))
def remove_song_from_playlist(ctx: Ctx, playlist_id: int, song_id: int) -> dict[str, Any]:
    if not _song_in(ctx, playlist_id, song_id):
        raise AppError(404, "The song is not in the playlist.")
    ctx.conn.execute("DELETE FROM playlist_songs WHERE playlist_id = ? AND song_id = ?", (playlist_id, song_id))
    return {"message": "Song removed from the playlist."}


@api("music", "Delete a playlist.", "{message}", Param("playlist_id", "integer", "The playlist.", required=True))
def delete_playlist(ctx: Ctx, playlist_id: int) -> dict[str, Any]:
    ctx.one("SELECT playlist_id FROM playlists WHERE playlist_id = ?", (playlist_id,), "playlist")
    ctx.conn.execute("DELETE FROM playlist_songs WHERE playlist_id = ?", (playlist_id,))
    ctx.conn.execute("DELETE FROM playlists WHERE playlist_id = ?", (playlist_id,))
    return {"message": "Playlist deleted."}
