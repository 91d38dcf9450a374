"""An upload's body as the file it carries (`upload_of`): a `multipart/form-data` form (a
browser's, `curl -F`, every SDK's) is read as the form it is, its one file part's bytes and
filename streamed as they come (python-multipart's parser, never the whole form in memory);
any other body is the file's bytes themselves (`curl --data-binary`, a page's fetch).

A form with no file part, with two, without a boundary or cut short is 400; a multipart body
of another kind (`multipart/mixed`, …) is 415; the form's own envelope (its boundaries, part
headers and other fields) is held to `FORM_ROOM` (413). The file's bytes are bounded by the
attachment store as they are kept (`engine.attachments`); a refusal while they stream leaves
nothing of the file kept.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import Request

from hearth.errors import Refusal

if TYPE_CHECKING:
    from python_multipart.multipart import MultipartCallbacks

FORM = b"multipart/form-data"
FORM_ROOM = 64 * 1024  # a form's bytes beside its file's: boundaries, part headers, fields
HOW = "send the file as the body itself, or as one file part of a form (curl -F file=@NAME)"


@dataclass(frozen=True)
class Upload:
    """The file a request carries: the name its form gave it (None: none given), its bytes."""

    name: str | None
    chunks: AsyncIterator[bytes]


async def upload_of(request: Request) -> Upload:
    """The file `request`'s body carries (refused with a sentence when it carries none)."""
    kind, options = parse_options_header(request.headers.get("content-type"))
    if not kind.startswith(b"multipart/"):
        return Upload(None, request.stream())
    if kind != FORM:
        raise Refusal("unsupported_media_type", 415,
                      f"An upload is not read from a {kind.decode('latin-1')} body; {HOW}. "
                      "Nothing was kept.")
    boundary = options.get(b"boundary")
    if not boundary:
        raise _unreadable("its Content-Type names no boundary")
    form = FormFile(boundary, request.stream())
    name = await form.file_name()
    return Upload(name, form.file_bytes())


def _unreadable(why: str) -> Refusal:
    return Refusal("invalid_form", 400, f"The form could not be read ({why}); {HOW}. Nothing "
                                        "was kept.")


@dataclass
class _Part:
    """What the parser said of the part it is in."""

    headers: dict[bytes, bytes] = field(default_factory=dict)
    header: bytes = b""
    value: bytes = b""
    file: bool = False


class FormFile:
    """One multipart/form-data body, parsed as it arrives: `file_name` reads up to its file
    part's data, then `file_bytes` gives that data and reads the rest of the form."""

    def __init__(self, boundary: bytes, chunks: AsyncIterator[bytes]) -> None:
        self._chunks = chunks
        self._said: list[tuple[str, bytes]] = []  # what the parser found in the last chunk
        self._part = _Part()
        self._files = 0
        self._beside = 0  # the form's bytes that are not the file's
        try:
            self._parser = MultipartParser(boundary, self._callbacks())
        except FormParserError as error:
            raise _unreadable("its boundary is not one") from error
        self._events = self._parse()

    def _callbacks(self) -> MultipartCallbacks:
        said = self._said
        return {
            "on_part_begin": lambda: said.append(("part", b"")),
            "on_header_field": lambda d, s, e: said.append(("field", d[s:e])),
            "on_header_value": lambda d, s, e: said.append(("value", d[s:e])),
            "on_header_end": lambda: said.append(("header_end", b"")),
            "on_headers_finished": lambda: said.append(("headers", b"")),
            "on_part_data": lambda d, s, e: said.append(("data", d[s:e])),
            "on_end": lambda: said.append(("end", b"")),
        }

    async def file_name(self) -> str:
        """Read up to the file part's data; the file's name as the form gave it."""
        async for kind, data in self._events:
            if kind == "file":
                return data.decode("utf-8", "replace")
        raise Refusal("no_file_in_form", 400,
                      f"The form has no file part (a part with a filename); {HOW}. Nothing "
                      "was kept.")

    async def file_bytes(self) -> AsyncIterator[bytes]:
        """The file part's bytes as they come; then the rest of the form, read to its end."""
        async for kind, data in self._events:
            if kind == "data":
                yield data
            elif kind == "end":
                return
        raise _unreadable("it ended before its closing boundary")

    async def _parse(self) -> AsyncIterator[tuple[str, bytes]]:
        """The form as it arrives: its file part beginning ("file", its name), the file's
        bytes ("data") and the form's end ("end"); the rest is followed and counted here."""
        async for chunk in self._chunks:
            try:
                self._parser.write(chunk)
            except FormParserError as error:
                raise _unreadable("it is not a well-formed multipart body") from error
            found, self._said[:] = list(self._said), []
            self._beside += len(chunk)
            kept = [event for said in found if (event := self._take(*said)) is not None]
            if self._beside > FORM_ROOM:
                raise Refusal("request_too_large", 413,
                              f"The form carries more than {FORM_ROOM // 1024} KB beside its "
                              "file; send the file alone. Nothing was kept.")
            for event in kept:
                yield event

    def _take(self, kind: str, data: bytes) -> tuple[str, bytes] | None:
        """Follow one thing the parser found: each part's headers, the count of files, the
        bytes beside the file; what the reader of the file is given, if anything."""
        part = self._part
        if kind == "part":
            self._part = _Part()
        elif kind == "field":
            part.header += data
        elif kind == "value":
            part.value += data
        elif kind == "header_end":
            part.headers[part.header.strip().lower()] = part.value.strip()
            part.header = part.value = b""
        elif kind == "headers":
            return self._part_begins(part)
        elif kind == "data" and part.file:
            self._beside -= len(data)
            return kind, data
        elif kind == "end":
            return kind, data
        return None

    def _part_begins(self, part: _Part) -> tuple[str, bytes] | None:
        options = _disposition(part.headers)
        part.file = b"filename" in options
        if not part.file:
            return None
        self._files += 1
        if self._files > 1:
            raise Refusal("one_file_per_upload", 400,
                          "The form carries more than one file; an upload is one file "
                          "(upload each on its own). Nothing was kept.")
        return "file", options[b"filename"]


def _disposition(headers: dict[bytes, bytes]) -> dict[bytes, bytes]:
    return parse_options_header(headers.get(b"content-disposition", b"").decode("latin-1"))[1]
