"""Typed request bodies of the HTTP API (pydantic); responses are the domain's JSON forms."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["AsOfBody", "PublishBody", "QueryBody"]


class AsOfBody(BaseModel):
    """A point in the owner's history: an event time or a log offset of the owner's partition."""

    model_config = ConfigDict(extra="forbid")

    time: str | int | None = Field(None, description="Event time: ISO-8601 or integer ms since the epoch.")
    offset: int | None = Field(None, ge=0, description="Offset on the owner's analyses partition.")


class QueryBody(BaseModel):
    """A question about one owner's memory."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(..., min_length=1, max_length=2000, description="The question, English or Chinese.")
    top_k: int = Field(10, ge=1, le=100, description="How many ranked items to return.")
    as_of: str | int | AsOfBody | None = Field(
        None, description="Answer from memory as it was then: ISO-8601 time, integer ms, or {time|offset}."
    )


class PublishBody(BaseModel):
    """Messages to publish, in the same shape as one JSON Lines record each."""

    model_config = ConfigDict(extra="forbid")

    messages: list[dict[str, Any]] = Field(..., min_length=1, max_length=5000, description="The messages.")
