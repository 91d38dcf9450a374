"""The Jobs page in Chromium: a cron job is scheduled from the form (and a bad expression is
said back with the field at fault, the form kept), each job shows its schedule in words and its
next time in its zone, and Pause, Resume, Run now and Delete work; at a phone's width (390 px)
the page does not scroll sideways. Saved to test-artifacts/screenshots/ in light and dark, on
a desktop and on a phone."""

from __future__ import annotations

from collections.abc import Callable

import pytest

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

from playwright.sync_api import Page, expect  # noqa: E402

from tests.fakes.model_server import Reply, ScriptedModelServer  # noqa: E402
from tests.gateway import Gateway  # noqa: E402
from tests.support.browser import DESKTOP, Shot, shots  # noqa: E402

SignedIn = Callable[[Gateway], Page]


def test_jobs_are_scheduled_and_managed_from_the_jobs_page(
        gateway: Gateway, model_server: ScriptedModelServer, signed_in: SignedIn,
        console_errors: list[str], shot: Shot) -> None:
    model_server.default = Reply(text="Report written.")
    page = signed_in(gateway)
    page.set_viewport_size(DESKTOP)
    page.goto(f"{gateway.url}/jobs")
    expect(page.get_by_role("link", name="Jobs")).to_have_attribute("aria-current", "page")
    expect(page.get_by_text("No scheduled jobs")).to_be_visible()
    shot(page, "jobs-empty-light")

    page.get_by_label("What the job asks each time").fill("Write the weekly report")
    page.get_by_label("When").select_option("cron")
    page.get_by_label("Minutes, cron expression or time").fill("0 9 * * 8")
    page.get_by_label("Time zone").fill("Europe/Paris")
    page.get_by_role("button", name="Schedule").click()
    expect(page.get_by_role("alert")).to_contain_text(
        "day-of-week field (5th field, at character 9) '8' is out of range (0-7)")
    expect(page.get_by_label("What the job asks each time")).to_have_value(
        "Write the weekly report")

    page.get_by_label("Minutes, cron expression or time").fill("0 9 * * 1-5")
    page.get_by_role("button", name="Schedule").click()
    expect(page.get_by_role("status")).to_contain_text("Scheduled.")
    job = page.locator("#job-1")
    expect(job).to_contain_text("Write the weekly report")
    expect(job).to_contain_text("every weekday at 09:00 (Europe/Paris)")
    expect(job).to_contain_text("09:00 (Europe/Paris)")
    expect(job).to_contain_text("last fired never")

    page.get_by_label("What the job asks each time").fill("Stretch")
    page.get_by_label("When").select_option("every")
    page.get_by_label("Minutes, cron expression or time").fill("45")
    page.get_by_label("Time zone").fill("")
    page.get_by_role("button", name="Schedule").click()
    expect(page.locator("#job-2")).to_contain_text("every 45 min")

    page.get_by_role("button", name="Pause job 2").click()
    expect(page.locator("#job-2")).to_contain_text("Paused")
    expect(page.get_by_role("button", name="Resume job 2")).to_be_visible()
    shots(page, gateway, shot, "/jobs", "jobs")

    page.get_by_role("button", name="Resume job 2").click()
    expect(page.locator("#job-2")).to_contain_text("On")
    page.get_by_role("button", name="Run now job 1").click()
    expect(page.get_by_role("status")).to_contain_text("Running now")
    api = gateway.client()
    [run] = [m for m in api.messages("job-1") if m["kind"] == "user"]
    assert run["text"] == "Write the weekly report"
    page.get_by_role("button", name="Delete job 2").click()
    expect(page.get_by_role("status")).to_contain_text("Deleted.")
    expect(page.locator("#job-2")).to_have_count(0)
    assert [j["id"] for j in api.http.get("/api/jobs").json()["jobs"]] == [1]
    # the one refused form came back as the page with status 422, as it should
    assert [e for e in console_errors if "422" not in e or "/jobs/add" not in e] == []
