"""The live bus's run waits: every waiter wakes when the run ends, a waiter that times out
leaves, and nothing is left behind once the last waiter has gone; and a run's `done` carries
the answer the bus saw published for it, which the bus holds only until that `done`."""

from __future__ import annotations

import asyncio

from hearth.engine.delivery.events import Bus, done_frame, until


def test_every_waiter_wakes_at_the_end_and_none_leaves_anything_behind() -> None:
    async def scenario() -> None:
        bus = Bus()
        patient = asyncio.create_task(bus.wait_run("run-1", 5))
        hasty = asyncio.create_task(bus.wait_run("run-1", 0.01))
        await hasty  # timed out; the patient waiter still waits
        assert not patient.done()
        bus.run_ended("run-1")
        await asyncio.wait_for(patient, 1)
        assert bus._run_ended == {} and dict(bus._waiters) == {}

    asyncio.run(scenario())


def test_a_wait_that_times_out_alone_leaves_nothing() -> None:
    async def scenario() -> None:
        bus = Bus()
        await bus.wait_run("run-2", 0.01)
        assert bus._run_ended == {} and dict(bus._waiters) == {}
        bus.run_ended("run-2")  # the run's end after nobody waits is harmless
        assert bus._run_ended == {}

    asyncio.run(scenario())


def test_an_end_between_watching_and_waiting_is_heard_at_once() -> None:
    """/wait watches, then reads the run's status, then waits: a run that ends while the read
    is away must wake it at once, not after the whole timeout."""
    async def scenario() -> None:
        bus = Bus()
        with bus.watching("run-3") as ended:
            await asyncio.sleep(0)  # the status read's await
            bus.run_ended("run-3")  # the run ends meanwhile
            assert await until(ended, 0.5)
        assert bus._run_ended == {} and dict(bus._waiters) == {}
        with bus.watching("run-4") as never:
            assert not await until(never, 0.01)  # the control: no end, a timeout
        assert bus._run_ended == {} and dict(bus._waiters) == {}

    asyncio.run(scenario())


def answer_frame(run_id: str, seq: int, text: str, kind: str = "assistant") -> dict[str, object]:
    return {"type": "message", "seq": seq, "run_id": run_id,
            "message": {"index": seq, "kind": kind, "text": text}}


def test_a_done_carries_the_runs_last_answer_and_the_bus_forgets_it_there() -> None:
    async def scenario() -> None:
        bus = Bus()
        sub = bus.subscribe("chat")
        bus.publish("chat", answer_frame("r1", 2, "Let me look."))
        bus.publish("chat", answer_frame("r1", 3, "read_file(...)", kind="tool_call"))
        bus.publish("chat", answer_frame("r1", 5, "Beds go south."))
        bus.publish("chat", answer_frame("r1", 6, "A notice.", kind="notice"))
        bus.publish("chat", done_frame("r2", "complete", "steered", "Sent into r1."))
        bus.publish("chat", done_frame("r1", "complete", "complete", "The agent answered."))
        bus.publish("chat", done_frame("r1", "complete", "complete", "Again."))
        frames = [sub.queue.get_nowait() for _ in range(7)]
        ends = [(f["run_id"], f["answer_seq"], f["answer"]) for f in frames
                if f is not None and f["type"] == "done"]
        assert ends == [("r2", None, None), ("r1", 5, "Beds go south."), ("r1", None, None)]
        assert bus._answers == {}  # nothing of the chat's turn is held past its done

    asyncio.run(scenario())
