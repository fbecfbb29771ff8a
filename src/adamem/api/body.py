"""The request body limit: ``MAX_BODY`` bytes at most, read before the application sees any of it."""

from __future__ import annotations

import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from adamem.api.errors import error_answer
from adamem.api.models import MAX_BODY, MAX_CONTEXT_CHARS, MAX_QUESTION_CHARS

__all__ = ["BodyLimit"]

_DIGITS = re.compile(rb"[0-9]{1,19}")


class BodyLimit:
    """Refuses a request body over ``MAX_BODY`` bytes while it streams in, chunked or not.

    The body is counted as each ASGI ``http.request`` message arrives, and the request is answered
    413 as soon as the count passes the limit — before the rest is read, so a chunked upload of any
    size costs at most ``MAX_BODY`` bytes of memory. A declared ``Content-Length`` over the limit is
    refused before any of the body is read; one that is not a decimal number (or two that differ) is
    a 400, and the connection is closed (its framing is unknown). The bytes read are then handed to
    the application as one message. After a 413 the server reads the rest of the body and drops it,
    so that the client, still sending, gets the answer rather than a reset connection.

    A plain ASGI middleware: Starlette's ``BaseHTTPMiddleware`` (``@app.middleware``) runs each
    request in a task group whose cancellation is re-delivered on every turn of the event loop
    while the request waits for its worker thread — a sixth of the service's CPU under load.
    """

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY, text_bytes: int = 32_768) -> None:
        self.app = app
        self.limit = limit
        self.text_bytes = text_bytes

    def too_large(self, path: str) -> str:
        """What is over the limit, said for the endpoint: a question, or messages and their texts."""
        over = f"the request body is over {self.limit} bytes, the most one request may send"
        if path == "/v1/messages":
            return (
                f"{over}: a message's text holds at most {self.text_bytes} bytes of UTF-8 (ADAMEM_MAX_TEXT_BYTES); "
                "send shorter texts, or fewer messages per call"
            )
        if path.endswith("/query"):
            return f"{over}: a question holds at most {MAX_QUESTION_CHARS} characters"
        if path.endswith("/research"):
            return f"{over}: a question holds at most {MAX_QUESTION_CHARS} characters, its context {MAX_CONTEXT_CHARS}"
        return over

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = self.too_large(scope["path"])
        declared = {v.strip() for k, v in scope["headers"] if k == b"content-length"}
        if declared:
            if len(declared) > 1 or not all(_DIGITS.fullmatch(v) for v in declared):
                detail = "Content-Length is not one decimal number of bytes"
                await error_answer(400, "bad_request", detail, {"Connection": "close"})(scope, receive, send)
                return
            if int(next(iter(declared))) > self.limit:
                await error_answer(413, "too_large", too_large)(scope, receive, send)
                return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await error_answer(413, "too_large", too_large)(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body: Message | None = {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        async def replay() -> Message:
            nonlocal body
            if body is not None:
                message, body = body, None
                return message
            return await receive()  # after the body: wait for the disconnect

        await self.app(scope, replay, send)
