"""An app's spending limit (`[limits.apps.NAME]`): once the app's priced turns reach it, its
next turn is refused with 429 `spending_limit`, the limit's sentence and `Retry-After`, and
nothing is admitted; the owner's turns go on. A real gateway (in this process, over HTTP)."""

from __future__ import annotations

from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.gateway import Api, Gateway, module_gateway
from tests.support.apps import app_token


def _priced(server: ScriptedModelServer) -> str:
    return (f'[[models]]\nid = "paid"\nprovider = "openai"\nbase_url = "{server.openai_base_url}"'
            '\napi_key = "sk-test"\nmodel = "fake-model"\nprice_in_per_mtok = 2.0\n'
            'price_out_per_mtok = 10.0\nmax_output_tokens = 200\n\n[chains]\nchat = ["paid"]\n\n'
            '[learning]\nevery_turns = 1000\n\n[limits.apps.bot]\nusd_per_day = 0.01\n')


server, gateway, api = module_gateway("spending-apps", _priced)


def test_an_apps_limit_is_a_429_with_the_sentence_before_anything_is_admitted(
        server: ScriptedModelServer, gateway: Gateway, api: Api) -> None:
    bot = gateway.client(app_token(api, "bot", "send_messages", "read_chats"))
    made = bot.http.post("/api/sessions", json={})
    assert made.status_code == 201, made.text
    key = made.json()["key"]
    server.push(Reply(text="bot answer", usage=(3000, 500)))
    first = bot.http.post(f"/api/sessions/{key}/messages", json={"text": "go"}).json()
    ended = bot.http.get(f"/api/runs/{first['run_id']}/wait", params={"timeout": 20}).json()
    assert ended["status"] == "complete", ended["sentence"]  # $0.011 spent: past the app's $0.01
    refused = bot.http.post(f"/api/sessions/{key}/messages", json={"text": "again"})
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert error["code"] == "spending_limit"
    assert 'daily spending limit for the app "bot" ($0.01) is reached: $0.011 spent today' \
        in error["message"]
    assert int(refused.headers["Retry-After"]) > 0
    server.push(Reply(text="owner answer", usage=(10, 5)))
    mine = api.http.post("/api/sessions", json={}).json()["key"]
    sent = api.http.post(f"/api/sessions/{mine}/messages", json={"text": "mine"}).json()
    owner = api.http.get(f"/api/runs/{sent['run_id']}/wait", params={"timeout": 20}).json()
    assert owner["status"] == "complete"  # the owner is not held to the app's limit
    history = api.http.get(f"/api/sessions/{key}").json()["messages"]
    assert [m["text"] for m in history if m["role"] == "user"] == ["go"]  # nothing admitted


def test_the_limits_are_read_and_replaced_by_the_owner_alone(
        server: ScriptedModelServer, gateway: Gateway, api: Api) -> None:
    admin = gateway.client(app_token(api, "boss", "admin"))
    read = admin.http.get("/api/limits")
    assert read.status_code == 200 and read.json()["limits"]["apps"]["bot"] == {
        "usd_per_day": 0.01, "usd_per_month": None}
    assert read.json()["unpriced"] == ["fake"]  # config's model with no price
    raised = admin.http.put("/api/limits", json={"apps": {"boss": {"usd_per_day": 100}}})
    assert raised.status_code == 403  # no app changes the limits, its own least of all
    for bad in ({"usd_per_day": -1}, {"usd_per_day": "lots"}, {"per_week": 3},
                {"apps": {"bot": {"usd_per_year": 1}}}):
        refused = api.http.put("/api/limits", json=bad)
        assert refused.status_code == 422, bad
        assert refused.json()["error"]["code"] == "invalid_request"
    kept = api.http.put("/api/limits", json={"usd_per_month": 20,
                                             "apps": {"bot": {"usd_per_day": 0.02}}})
    assert kept.status_code == 200
    assert kept.json()["limits"]["usd_per_month"] == 20.0
    assert kept.json()["limits"]["apps"] == {"bot": {"usd_per_day": 0.02, "usd_per_month": None}}
    standing = {(r["kind"], r["period"]): r for r in kept.json()["standing"]}
    bot = standing[("app", "day")]
    assert bot["usd"] == 0.02 and bot["reached"] is (bot["spent_usd"] >= 0.02)
    assert standing[("all", "month")]["usd"] == 20.0
