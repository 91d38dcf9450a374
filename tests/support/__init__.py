"""What the tests share, defined once and imported where used, never copied into a test file and
never imported from one. Assertions and waits: `http` (the error envelope), `polling` (`until`),
`approvals` (a pending approval). Gateways' data: `store` (a migrated store; reading a gateway's
database file), `apps` (an app's token). Surfaces: `dashboard` (in process under TestClient; a
signed-in page over HTTP), `cli` (the `hearth` command), `terminal` (`hearth chat` in a pty),
`browser` (Playwright's sizes and screenshots), `telegram` (the channel's config and readers).
Tools and data: `tools` (running a tool, its refusal, a scripted tool), `models` (a priced model
config), `web_site` (a local site for web_fetch), `commands`, `search`, `census` (the source
tree parsed), `dependency_census` (its imports against pyproject's), `without` (the command with
an extra's packages not installed), `core_install` (the core alone in a fresh virtualenv).
`fixtures` holds the fixtures several folders use; each folder's conftest.py imports those it
needs."""
