"""Search across chats: a full-text index (SQLite FTS5) of what was said in the kept chats.

`chat_search` indexes the `text` of the user's messages and the answers (`kind` user or
assistant, content `{"text": ...}`) of persistent chats only, with the `unicode61` tokenizer
folding accents (`remove_diacritics 2`: "café" finds "cafe" and the other way round). It keeps
no copy of the text: its content is the view `chat_search_text`, which reads each message's
text from `transcript_events`, so what was said is stored once. Its rowid is
`chat_search_messages.id`, which names the message by (chat, seq) — the events table has no
integer key of its own, and its implicit rowid is not stable (a table rebuild renumbers it) —
and copies what a search filters every match by: when it was said and whether it is on its
chat's path (`off_path`), so a search reads no message but those it shows. Ids grow as
messages are said.

Triggers keep it as the store writes, whatever code path writes:
- a message appended to a chat whose recorded mode is exactly "persistent" is indexed (an
  Incognito, Temporary or unreadable chat's never is: the trigger reads `sessions.memory_mode`);
- a message moved off its chat's path or back (`off_path`, by the branching operations) is
  marked so; a message whose text is changed (nothing does so today) is indexed afresh;
- a message deleted leaves the index, its words given back as FTS5's external content needs;
- a kept chat deleted (its row goes after its messages) merges the index into one segment
  (`optimize`): FTS5 keeps a deleted message's words in the segments that indexed them until
  a merge, and a deleted chat leaves no byte of its text behind. The merge rewrites the whole
  index (about a second for 200,000 messages); SQLite's FTS5 `secure-delete` would make it
  needless, from SQLite 3.42 on;
- a chat whose mode changed from persistent to anything else (a mode is fixed when a chat is
  made today; this holds if that ever changes) has its messages taken out, merged likewise.

The upgrade indexes the persistent chats already there; the downgrade drops it all. Only
SQLite has FTS5: on any other database nothing is made here, and search reads the messages
with a plain LIKE scan (`store/search.py`).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-12
"""

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

# the highlight markers `snippet()` puts around a matched word (private-use characters, taken
# out of every indexed text so only the markers are ever markers); kept equal to store/search.py
MARKS = (0xE000, 0xE001)
_TEXT = ("replace(replace(json_extract({row}.content, '$.text'), "
         f"char({MARKS[0]}), ''), char({MARKS[1]}), '')")
# an event is indexed when it is a user message or an answer whose content holds a text
_SEARCHED = ("{row}.kind IN ('user', 'assistant') AND CASE WHEN json_valid({row}.content) "
             "THEN json_type({row}.content, '$.text') = 'text' ELSE 0 END")
_KEPT_CHAT = "(SELECT memory_mode FROM sessions WHERE key = {row}.session_key) = 'persistent'"
_THIS = "session_key = {row}.session_key AND seq = {row}.seq"
_OPTIMIZE = "INSERT INTO chat_search(chat_search) VALUES ('optimize');"


def _unindex(row: str) -> str:
    """The statements taking `row`'s message out of the index, if it is in it (FTS5 is told
    the words it indexed: the text as it was)."""
    return ("INSERT INTO chat_search(chat_search, rowid, text) "
            f"SELECT 'delete', id, {_TEXT.format(row=row)} FROM chat_search_messages "
            f"WHERE {_THIS.format(row=row)}; "
            f"DELETE FROM chat_search_messages WHERE {_THIS.format(row=row)};")


def _index(row: str) -> str:
    return ("INSERT INTO chat_search_messages(session_key, seq, created_at, off_path) "
            f"VALUES ({row}.session_key, {row}.seq, {row}.created_at, {row}.off_path); "
            "INSERT INTO chat_search(rowid, text) "
            f"VALUES (last_insert_rowid(), {_TEXT.format(row=row)});")


TRIGGERS = {
    "chat_search_event_added": (
        "AFTER INSERT ON transcript_events "
        f"WHEN {_SEARCHED.format(row='new')} AND {_KEPT_CHAT.format(row='new')} "
        f"BEGIN {_index('new')} END"),
    "chat_search_event_moved": (
        "AFTER UPDATE OF off_path ON transcript_events WHEN old.off_path IS NOT new.off_path "
        "AND old.kind IN ('user', 'assistant') BEGIN "
        "UPDATE chat_search_messages SET off_path = new.off_path "
        f"WHERE {_THIS.format(row='new')}; END"),
    "chat_search_event_changed": (  # out as it was, in again as it reads now (if it may)
        "AFTER UPDATE OF content ON transcript_events WHEN old.content IS NOT new.content "
        f"BEGIN {_unindex('old')} "
        "INSERT INTO chat_search_messages(session_key, seq, created_at, off_path) "
        "SELECT new.session_key, new.seq, new.created_at, new.off_path "
        f"WHERE {_SEARCHED.format(row='new')} AND {_KEPT_CHAT.format(row='new')}; "
        f"INSERT INTO chat_search(rowid, text) SELECT id, {_TEXT.format(row='new')} "
        f"FROM chat_search_messages WHERE {_THIS.format(row='new')}; END"),
    "chat_search_event_deleted": (
        "AFTER DELETE ON transcript_events WHEN old.kind IN ('user', 'assistant') "
        f"BEGIN {_unindex('old')} END"),
    "chat_search_chat_deleted": (  # its messages went first (they name it: a foreign key)
        "AFTER DELETE ON sessions WHEN old.memory_mode = 'persistent' "
        f"AND old.message_count > 0 BEGIN {_OPTIMIZE} END"),
    "chat_search_chat_restricted": (
        "AFTER UPDATE OF memory_mode ON sessions WHEN old.memory_mode = 'persistent' "
        "AND new.memory_mode IS NOT 'persistent' BEGIN "
        "INSERT INTO chat_search(chat_search, rowid, text) SELECT 'delete', t.id, t.text "
        "FROM chat_search_text t JOIN chat_search_messages m ON m.id = t.id "
        "WHERE m.session_key = new.key; "
        "DELETE FROM chat_search_messages WHERE session_key = new.key; "
        f"{_OPTIMIZE} END"),
}


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return  # no FTS5: search scans the messages instead (store/search.py)
    op.execute("CREATE TABLE chat_search_messages (id INTEGER PRIMARY KEY, "
               "session_key VARCHAR(200) NOT NULL, seq INTEGER NOT NULL, "
               "created_at FLOAT NOT NULL, off_path BOOLEAN NOT NULL DEFAULT 0, "
               "UNIQUE (session_key, seq))")
    op.execute(f"CREATE VIEW chat_search_text AS SELECT m.id AS id, {_TEXT.format(row='e')} "
               "AS text FROM chat_search_messages m JOIN transcript_events e "
               "ON e.session_key = m.session_key AND e.seq = m.seq")
    op.execute("CREATE VIRTUAL TABLE chat_search USING fts5(text, content='chat_search_text', "
               "content_rowid='id', tokenize='unicode61 remove_diacritics 2')")
    _backfill()
    for name, body in TRIGGERS.items():
        op.execute(f"CREATE TRIGGER {name} {body}")


def _backfill() -> None:
    """Index the persistent chats' messages already kept, oldest first (so the ids' order
    is the order they were said in)."""
    op.execute(
        "INSERT INTO chat_search_messages(session_key, seq, created_at, off_path) "
        "SELECT e.session_key, e.seq, e.created_at, e.off_path "
        "FROM transcript_events e JOIN sessions s ON s.key = e.session_key "
        f"WHERE s.memory_mode = 'persistent' AND {_SEARCHED.format(row='e')} "
        "ORDER BY e.created_at, e.session_key, e.seq")
    op.execute("INSERT INTO chat_search(chat_search) VALUES ('rebuild')")


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for name in TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {name}")
    op.execute("DROP TABLE IF EXISTS chat_search")
    op.execute("DROP VIEW IF EXISTS chat_search_text")
    op.execute("DROP TABLE IF EXISTS chat_search_messages")
