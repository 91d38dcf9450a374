"""The tables: one SQLAlchemy Core MetaData, the shape the Alembic migrations build.

Timestamps are UNIX seconds (float). JSON columns hold dicts. Every table is keyed so the hot
paths (append an event, read a window, claim the next run) are index lookups whatever the size.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
)

metadata = MetaData()

sessions = Table(
    "sessions",
    metadata,
    Column("key", String(200), primary_key=True),
    Column("tab_id", String(64), nullable=False),
    Column("title", Text),
    Column("title_by", String(20)),  # owner | chore | none (unknown: kept as the owner's)
    Column("memory_mode", String(20), nullable=False),
    Column("agent", String(100), nullable=False, server_default="default"),
    Column("model", String(200)),
    Column("workspace_dir", Text),
    Column("created_by_app", String(100)),
    Column("origin", String(50), nullable=False, server_default="api"),
    Column("parent_key", String(200)),
    Column("folder", String(200)),
    Column("tags", JSON, nullable=False, default=list),
    Column("pinned", Boolean, nullable=False, server_default="0"),
    Column("archived", Boolean, nullable=False, server_default="0"),
    Column("generation", Integer, nullable=False, server_default="0"),
    Column("head_event_id", String(64)),
    Column("writer_run_id", String(64)),
    Column("chat_number", Integer),
    Column("trust", String(20), nullable=False, server_default="ask"),  # ask | trusted
    Column("last_seq", Integer, nullable=False, server_default="0"),
    Column("message_count", Integer, nullable=False, server_default="0"),
    Column("learned_seq", Integer, nullable=False, server_default="0"),  # learned up to here
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Index("ix_sessions_chat_number", "chat_number"),
    Index("ix_sessions_updated", "updated_at", "key"),
)

transcript_events = Table(
    "transcript_events",
    metadata,
    Column("session_key", String(200), ForeignKey("sessions.key"), primary_key=True),
    Column("seq", Integer, primary_key=True, autoincrement=False),
    Column("event_id", String(64), nullable=False, unique=True),
    Column("parent_event_id", String(64)),
    Column("idempotency_key", String(200)),
    Column("kind", String(20), nullable=False),
    Column("content", JSON, nullable=False),
    Column("meta", JSON, nullable=False),
    Column("source_thread", String(200)),
    Column("source_user", String(200)),
    Column("source_channel", String(100)),
    Column("run_id", String(64)),
    Column("created_at", Float, nullable=False),
    # not on the path from the first message to the head: a variant or what a rewind left
    Column("off_path", Boolean, nullable=False, server_default=false()),
    UniqueConstraint("session_key", "idempotency_key", name="uq_events_idempotency"),
    Index("ix_events_parent", "session_key", "parent_event_id"),
)

runs = Table(
    "runs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(64), nullable=False, unique=True),
    Column("session_key", String(200), ForeignKey("sessions.key"), nullable=False),
    Column("tab_id", String(64), nullable=False),
    Column("generation", Integer, nullable=False),
    Column("kind", String(20), nullable=False),
    Column("status", String(20), nullable=False),
    Column("ending", String(50)),
    Column("sentence", Text),
    Column("recovery_attempts", Integer, nullable=False, server_default="0"),
    Column("model", String(200)),
    Column("user_event_seq", Integer),
    Column("created_at", Float, nullable=False),
    Column("started_at", Float),
    Column("ended_at", Float),
    Column("partial_text", Text),  # the answer streaming at the last checkpoint
    Column("partial_at", Float),
    Column("ended_seq", Integer),  # the chat's last seq when the run ended (done replay)
    Column("principal", String(300), nullable=False, server_default="owner"),  # on whose behalf
    Column("replica", String(64)),  # the gateway running it (store/replicas.py); None: none
    Index("ix_runs_queue", "session_key", "status", "id"),
    Index("ix_runs_status", "status", "id"),
    Index("ix_runs_ended", "session_key", "ended_seq"),
)

tool_calls = Table(
    "tool_calls",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(64), nullable=False),
    Column("session_key", String(200), nullable=False),
    Column("call_id", String(200), nullable=False),
    Column("position", Integer, nullable=False),
    Column("tool", String(200), nullable=False),
    Column("arguments", JSON, nullable=False),
    Column("effect", String(20), nullable=False),
    Column("status", String(20), nullable=False),
    Column("result", Text),
    Column("receipt", Text),
    Column("started_at", Float),
    Column("ended_at", Float),
    UniqueConstraint("run_id", "call_id", name="uq_tool_calls_call"),
)

audit = Table(
    "audit",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", Float, nullable=False),
    Column("action", String(100), nullable=False),
    Column("actor", String(100), nullable=False),
    Column("session_key", String(200)),
    Column("run_id", String(64)),
    Column("detail", JSON, nullable=False),
    Index("ix_audit_at", "at"),
)

approvals = Table(
    "approvals",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("run_id", String(64), nullable=False),
    Column("session_key", String(200), nullable=False),
    Column("call_id", String(200), nullable=False),
    Column("agent", String(100), nullable=False),
    Column("tool", String(200), nullable=False),
    Column("arguments", JSON, nullable=False),
    Column("effect", String(20), nullable=False),
    Column("target", Text),
    Column("status", String(20), nullable=False),  # pending | allowed | denied | cancelled
    Column("decision", String(20)),  # allow_once | allow_always | deny
    Column("prefix", Text),
    Column("created_at", Float, nullable=False),
    Column("decided_at", Float),
    Column("principal", String(300), nullable=False, server_default="owner"),  # who asked
    UniqueConstraint("run_id", "call_id", name="uq_approvals_call"),
    Index("ix_approvals_status", "status", "created_at"),
)

grants = Table(
    "grants",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("agent", String(100), nullable=False),
    Column("tool", String(200), nullable=False),
    Column("prefix", Text),  # a path or command prefix the grant is limited to
    Column("approval_id", String(64)),
    Column("created_at", Float, nullable=False),
    Index("ix_grants_agent_tool", "agent", "tool"),
)

# Memory: what the agent was taught (kind fact | preference | lesson | commitment) and the
# passages of the markdown memory documents (kind document, `source` the file). `filed_under`
# names the chat an item came from; NULL when more than one chat (or the owner) stands behind
# it. The FTS5 index `memory_fts` (SQLite) is kept by triggers made in migration 0004.
memory_items = Table(
    "memory_items",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("kind", String(20), nullable=False),
    Column("text", Text, nullable=False),
    Column("fingerprint", String(64), nullable=False),
    Column("source", Text),
    Column("written_by", String(200), nullable=False),
    Column("filed_under", String(200)),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Column("recall_count", Integer, nullable=False, server_default="0"),
    Column("last_recalled_at", Float),
    Index("ix_memory_items_fingerprint", "fingerprint"),
    Index("ix_memory_items_filed_under", "filed_under"),
    Index("ix_memory_items_source", "source"),
    Index("ix_memory_items_kind", "kind", "id"),
)

# Scheduled jobs: a prompt admitted into the job's own chat (`session_key`, `job-<id>`) at
# `next_at`, then every `every_seconds`, or at each time of the `cron` expression in the IANA
# zone `timezone` (neither: once, then disabled). `missed`: what fires missed while the gateway
# was down come to, `once` (one catch-up run) or `skip`. `made_by` is the chat whose tool made
# it, or "owner". Ids are never reused (a job's chat keeps its name).
jobs = Table(
    "jobs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("prompt", Text, nullable=False),
    Column("every_seconds", Integer),
    Column("next_at", Float, nullable=False),
    Column("enabled", Boolean, nullable=False, server_default="1"),
    Column("session_key", String(200), nullable=False),
    Column("made_by", String(200), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("last_fired_at", Float),
    Column("cron", String(200)),
    Column("timezone", String(64)),
    Column("missed", String(10), nullable=False, server_default="once"),
    Column("principal", String(300), nullable=False, server_default="owner"),  # whose job
    Index("ix_jobs_due", "enabled", "next_at"),
    sqlite_autoincrement=True,
)

# Model calls: one row per model call (a turn's step, a chore's, a Settings Test), written by
# the call guard (`models.calls`) when the call's stream ends. `purpose` is the caller's word
# (turn, learning, title, compaction, summary, probe); `outcome` one of ok, failed, timeout,
# cut_off, output_cap, refused. `cost_usd` is priced once, at the prices of the model that
# answered; NULL when it has none (never 0). `session_key` only for a persistent chat (NULL for
# Incognito, Temporary and work of no chat). Never any text. `calls` is 1, except on rows
# carried over from the daily totals this table replaced (purpose "earlier"), which keep that
# day's count. `day` is the UTC day of `created_at`, 'YYYY-MM-DD'.
model_calls = Table(
    "model_calls",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("created_at", Float, nullable=False),
    Column("day", String(10), nullable=False),
    Column("model_id", String(200), nullable=False),
    Column("provider", String(50), nullable=False),
    Column("purpose", String(30), nullable=False),
    Column("outcome", String(20), nullable=False),
    Column("tokens_in", Integer, nullable=False, server_default="0"),
    Column("tokens_out", Integer, nullable=False, server_default="0"),
    Column("cost_usd", Float),
    Column("duration_ms", Integer, nullable=False, server_default="0"),
    Column("session_key", String(200)),
    Column("calls", Integer, nullable=False, server_default="1"),
    Column("agent", String(80)),  # the account spent for (models.spending): its chat's agent,
    Column("app", String(80)),  # the app it ran for,
    Column("job", Integer),  # the job that fired it
    # its cost is an estimate: it ended with no usage report (a stopped turn, a cut stream)
    Column("estimated", Boolean, nullable=False, server_default=false()),
    Index("ix_model_calls_day_model", "day", "model_id"),
    Index("ix_model_calls_session", "session_key"),
)

# Dashboard sign-ins: one row per signed-in cookie, keyed by a hash of the random id the cookie
# carries (never the id itself). Signing out deletes the row, so that cookie is refused from
# then on; a row past `expires_at` counts for nothing and is pruned at the next sign-in.
signins = Table(
    "signins",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("issued_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
)

# One-time sign-in links (`hearth token --link`): one row per link, keyed by a hash of its code
# (never the code itself). `used_at` is set by the one use that wins; a row is pruned a while
# after `expires_at`, used or not, whenever a link is made or used.
signin_links = Table(
    "signin_links",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("created_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
    Column("used_at", Float, nullable=True),
)

# Owed chores: a background chore no model of the background chain could do (each failed or
# answered in the wrong shape), tried again from `next_at` on. `attempts` counts the tries
# made so far; `run_id` names the turn whose exchange the chore reads. No text is kept here:
# a retry reads the exchange from the transcript again. Deleting a chat drops its rows.
owed_chores = Table(
    "owed_chores",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("kind", String(40), nullable=False),
    Column("session_key", String(200), nullable=False),
    Column("run_id", String(64)),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("next_at", Float, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("reason", Text),  # why no model could do it at its last try, in a sentence
    Index("ix_owed_chores_due", "next_at"),
    Index("ix_owed_chores_session", "session_key"),
    sqlite_autoincrement=True,
)

# A chat's compacted view: a summary standing in, for the model, for the chat's events
# (head_through, through_seq] (the opening up to head_through is read as it was). Derived: the
# transcript is untouched, and a record stops applying once the events it summarized change
# (`fingerprint`: their count and row ids). `kind` is "compaction" (a turn's or
# /compact's) or "idle" (the idle chore's). `asks` lists the owner's requests in their words.
# Restricted chats never get a row. Removed with the chat (ON DELETE CASCADE).
context_summaries = Table(
    "context_summaries",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("session_key", String(200), ForeignKey("sessions.key", ondelete="CASCADE"),
           nullable=False),
    Column("kind", String(20), nullable=False),
    Column("head_through", Integer, nullable=False),
    Column("through_seq", Integer, nullable=False),
    Column("fingerprint", String(64), nullable=False),
    Column("summary", Text, nullable=False),
    Column("asks", JSON, nullable=False, default=list),
    Column("model_id", String(200)),
    Column("created_at", Float, nullable=False),
    Index("ix_context_summaries_chat", "session_key", "id"),
    sqlite_autoincrement=True,
)

# Channel links: a chat continues on one channel thread, and a thread continues one chat
# (both unique). `owner_dm`: the thread is the owner's own direct chat on its channel (told
# once where the chat went when it moves on). `delivered_seq`: the chat's last event handed
# to the delivery ledger (what follows it is owed to the thread). Removed with the chat.
channel_links = Table(
    "channel_links",
    metadata,
    Column("session_key", String(200), ForeignKey("sessions.key", ondelete="CASCADE"),
           primary_key=True),
    Column("channel", String(40), nullable=False),
    Column("thread", String(200), nullable=False),
    Column("owner_dm", Boolean, nullable=False, server_default=false()),
    Column("delivered_seq", Integer, nullable=False, server_default="0"),
    Column("created_at", Float, nullable=False),
    UniqueConstraint("channel", "thread", name="uq_channel_links_thread"),
)

# The delivery ledger: one row per message sent to a channel, `created` before the send,
# `attempted_at` set as the send starts, then `sent` (with the channel's message id), `failed`
# (with why) or `unknown` (a send a crash interrupted, which the channel cannot confirm).
# `kind`: reply (an answer's part), notice, approval (a question with its approval id), note
# (a link's one-time word to the thread it left). Removed with the chat.
deliveries = Table(
    "deliveries",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("session_key", String(200), ForeignKey("sessions.key", ondelete="CASCADE"),
           nullable=False),
    Column("channel", String(40), nullable=False),
    Column("thread", String(200), nullable=False),
    Column("kind", String(20), nullable=False),
    Column("event_seq", Integer),
    Column("approval_id", String(64)),
    Column("part", Integer, nullable=False, server_default="1"),
    Column("parts", Integer, nullable=False, server_default="1"),
    Column("text", Text, nullable=False),
    Column("status", String(20), nullable=False),
    Column("message_id", String(100)),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("error", Text),
    Column("attempted_at", Float),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Index("ix_deliveries_due", "channel", "status", "id"),
    Index("ix_deliveries_chat", "session_key", "id"),
    Index("ix_deliveries_sent_as", "channel", "message_id"),
    sqlite_autoincrement=True,
)

# Inbound messages a channel admitted, by the channel's own id (Telegram's update_id): a
# redelivery is admitted once. No text and no chat: only that it was taken in, and when.
channel_inbound = Table(
    "channel_inbound",
    metadata,
    Column("channel", String(40), primary_key=True),
    Column("inbound_id", String(200), primary_key=True),
    Column("received_at", Float, nullable=False),
)

# A channel's own cursor (Telegram's next update offset), committed in the transaction that
# admitted what it passed; `token`, an opaque position that goes with it (Matrix's `since`).
channel_cursors = Table(
    "channel_cursors",
    metadata,
    Column("channel", String(40), primary_key=True),
    Column("position", Integer, nullable=False),
    Column("token", String(500)),
    Column("updated_at", Float, nullable=False),
)

# Apps: programs given a token of their own (`hearth apps add`), with the permissions they were
# given (a JSON list). `token_hash` is the SHA-256 (hex) of the token: the token itself is shown
# once and never kept. A revoked app's row stays (its name stays taken, its chats its own).
apps = Table(
    "apps",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(100), nullable=False, unique=True),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("permissions", JSON, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("last_used_at", Float),
    Column("revoked_at", Float),
)

# The gateways serving this database (store/replicas.py): each renews its row every third of
# its lease; a row not renewed for a whole lease is a dead replica, whose running runs another
# takes back. Times are the database's clock, one clock for every replica.
replicas = Table(
    "replicas",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("place", String(500), nullable=False),  # host:home of the gateway
    Column("pid", Integer, nullable=False),
    Column("started_at", Float, nullable=False),
    Column("beat_at", Float, nullable=False),
)

# Named leases, each held by one live replica at a time (the leader's: the scheduler, the
# sweepers and the chat channels run on one replica only).
leases = Table(
    "leases",
    metadata,
    Column("name", String(40), primary_key=True),
    Column("holder", String(64), nullable=False),
    Column("until_at", Float, nullable=False),
)

# Files sent with a message (sessions/attachments.py keeps the bytes, content-addressed, in the
# chat's own folder): held once uploaded, then the message that names it (`event_seq`) at its
# admission. The name is the one the sender gave, cleaned; `content_type` is sniffed.
attachments = Table(
    "attachments",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("session_key", String(200), ForeignKey("sessions.key"), nullable=False),
    Column("event_seq", Integer),  # the message it was sent with; None: not sent yet
    Column("sha256", String(64), nullable=False),
    Column("name", String(255), nullable=False),
    Column("content_type", String(100), nullable=False),
    Column("size", Integer, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("transcript", Text),  # an audio file's words, once a transcription model heard it
    Index("ix_attachments_chat", "session_key", "event_seq"),
)

# Tables of the gateways at work, not of what is kept: never copied (`hearth db copy`).
RUNTIME_TABLES = frozenset({"replicas", "leases"})
