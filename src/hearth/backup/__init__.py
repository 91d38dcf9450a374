"""Backups you can restore: one archive of a home, made while the gateway serves.

An archive (`hearth-backup-YYYYMMDD-HHMMSS.tar.gz`, the time in UTC) holds, as regular files
only:

- `db/hearth.db` (SQLite: an online snapshot, `store/backup.py`) or `db/hearth.sql`
  (PostgreSQL: pg_dump's data, `store/pg_dump.py`), with no row of an Incognito, Temporary or
  deleted chat;
- `home/…`: config.toml, settings.json, the memory documents (`workspace/memory/`), the
  agents' files (`agents/`), the saved prompts (`prompts/`) and each kept chat's own folder
  (`sessions/<key>/`: its attachments);
- `manifest.json`: the format's version, when it was made, the database's engine and schema
  revision, and each file's path, size and sha256;
- `manifest.hmac`, last: the manifest signed with the home's backup key (`keys.py`), so an
  archive changed by anyone without the key is refused.

Never in it: the token (a restored home makes a new one), the backup key, the logs, the
workspace's other files, the folders of chats that keep nothing or were deleted.

`making.py` makes one (written under a temporary name, synced, then linked to its name, so
a backup killed midway leaves no file a verify accepts), `reading.py` reads and verifies one,
`restoring.py` restores one into an empty home, `rotation.py` names them and keeps the
newest. `manifest.py` is the manifest and the refusal every step raises, `keys.py` the key.
"""
