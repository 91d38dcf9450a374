"""Search across chats on PostgreSQL: a tsvector of each kept message in a GIN index.

SQLite has its FTS5 index since migration 0013; PostgreSQL gets its own full-text search here,
behind the same store functions (`store/search.py`) and the same query syntax. The table
`chat_search_messages` holds, for each user message and answer of a persistent chat only, its
place (chat, seq), when it was said, whether it is on its chat's path, and `words`: its text
folded (lower case, accents taken off by the `unaccent` extension, so "cafe" finds "café")
as a tsvector of the `simple` configuration (no stemming: every language alike). A GIN index
finds the messages holding the words.

Triggers keep it as the store writes, whatever code path writes, as SQLite's do: a message
appended to a persistent chat is indexed (an Incognito, Temporary or unreadable chat's never
is: the trigger reads `sessions.memory_mode`); a message moved off its path or back, or whose
text changes, is indexed afresh; a deleted message leaves it; a chat no longer persistent has
its messages taken out. PostgreSQL keeps a deleted row's bytes in its pages until VACUUM
reuses them (and in the write-ahead log until its segments are recycled): a deletion is
followed by a VACUUM of this table and the transcript's (`Database.vacuum_said`).

On SQLite nothing is made here.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-04
"""

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

FOLD = ("CREATE OR REPLACE FUNCTION hearth_fold(text) RETURNS text LANGUAGE sql IMMUTABLE "
        "PARALLEL SAFE STRICT AS $$ SELECT lower(public.unaccent('public.unaccent'::regdictionary,"
        " $1)) $$")
# a message's text, the highlight markers taken out (store/search.py's MARK_OPEN and _CLOSE)
SAID = ("CREATE OR REPLACE FUNCTION hearth_said(content json) RETURNS text LANGUAGE sql "
        "IMMUTABLE PARALLEL SAFE AS $$ SELECT replace(replace(content->>'text', "
        "U&'\\E000', ''), U&'\\E001', '') $$")
ON_EVENT = """
CREATE OR REPLACE FUNCTION hearth_search_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    DELETE FROM chat_search_messages WHERE session_key = OLD.session_key AND seq = OLD.seq;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.kind IN ('user', 'assistant')
     AND json_typeof(NEW.content->'text') = 'string'
     AND (SELECT memory_mode FROM sessions WHERE key = NEW.session_key) = 'persistent' THEN
    INSERT INTO chat_search_messages(session_key, seq, created_at, off_path, words)
    VALUES (NEW.session_key, NEW.seq, NEW.created_at, NEW.off_path,
            to_tsvector('simple', hearth_fold(hearth_said(NEW.content))));
  END IF;
  RETURN NULL;
END $$"""
ON_CHAT = """
CREATE OR REPLACE FUNCTION hearth_search_chat() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.memory_mode = 'persistent' AND NEW.memory_mode IS DISTINCT FROM 'persistent' THEN
    DELETE FROM chat_search_messages WHERE session_key = NEW.key;
  END IF;
  RETURN NULL;
END $$"""


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("CREATE EXTENSION IF NOT EXISTS unaccent")
    op.execute(FOLD)
    op.execute(SAID)
    op.execute("CREATE TABLE chat_search_messages (id BIGSERIAL PRIMARY KEY, "
               "session_key VARCHAR(200) NOT NULL, seq INTEGER NOT NULL, "
               "created_at DOUBLE PRECISION NOT NULL, off_path BOOLEAN NOT NULL DEFAULT false, "
               "words tsvector NOT NULL, UNIQUE (session_key, seq))")
    op.execute("CREATE INDEX ix_chat_search_words ON chat_search_messages USING gin (words)")
    op.execute(
        "INSERT INTO chat_search_messages(session_key, seq, created_at, off_path, words) "
        "SELECT e.session_key, e.seq, e.created_at, e.off_path, "
        "to_tsvector('simple', hearth_fold(hearth_said(e.content))) "
        "FROM transcript_events e JOIN sessions s ON s.key = e.session_key "
        "WHERE s.memory_mode = 'persistent' AND e.kind IN ('user', 'assistant') "
        "AND json_typeof(e.content->'text') = 'string' "
        "ORDER BY e.created_at, e.session_key, e.seq")
    op.execute(ON_EVENT)
    op.execute(ON_CHAT)
    op.execute("CREATE TRIGGER chat_search_event AFTER INSERT OR DELETE OR UPDATE OF content, "
               "off_path ON transcript_events FOR EACH ROW EXECUTE FUNCTION hearth_search_event()")
    op.execute("CREATE TRIGGER chat_search_chat AFTER UPDATE OF memory_mode ON sessions "
               "FOR EACH ROW EXECUTE FUNCTION hearth_search_chat()")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP TRIGGER IF EXISTS chat_search_event ON transcript_events")
    op.execute("DROP TRIGGER IF EXISTS chat_search_chat ON sessions")
    op.execute("DROP TABLE IF EXISTS chat_search_messages")
    for name in ("hearth_search_event()", "hearth_search_chat()", "hearth_said(json)",
                 "hearth_fold(text)"):
        op.execute(f"DROP FUNCTION IF EXISTS {name}")
