"""Named failures the store raises; each carries a sentence a person can act on."""


class StoreError(Exception):
    """Base of the store's named failures."""


class SessionNotFound(StoreError):
    def __init__(self, key: str) -> None:
        super().__init__(f"There is no chat named {key!r}.")
        self.key = key


class WriterClaimLost(StoreError):
    """A run tried to append to a session it no longer owns."""

    def __init__(self, key: str, run_id: str | None) -> None:
        super().__init__(f"Run {run_id} no longer owns chat {key!r}, so it may not write to it.")
        self.key = key
        self.run_id = run_id


class AlreadyAppended(StoreError):
    """An event with this idempotency key is already in the transcript."""

    def __init__(self, key: str, idempotency_key: str) -> None:
        super().__init__(f"Chat {key!r} already holds the event {idempotency_key!r}.")
        self.idempotency_key = idempotency_key


class WriterDied(StoreError):
    """The one writer stopped (a commit failed): no write can be trusted to land any more."""

    def __init__(self, sentence: str) -> None:
        super().__init__(sentence or "The database writer has stopped.")
