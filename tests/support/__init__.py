"""What the tests share, defined once and imported where used (never copied into a test file):
`http`, the error envelope's assertions; `polling`, waiting for a condition; `approvals`, waiting
for a turn to ask; `apps`, apps the owner makes; `store`, a migrated store and reading a
gateway's database file; `dashboard`, the dashboard in process under TestClient and a signed-in
page over HTTP; `fixtures`, the fixtures several folders use (their conftest.py imports them)."""
