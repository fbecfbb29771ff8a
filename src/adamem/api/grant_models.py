"""The bodies and answers of the grant routes (``api.routes.grants``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from adamem.api.models import MAX_WAIT_MS, NotBlank, Time, WaitMs

__all__ = ["GrantAnswer", "GrantBody", "GrantChangeBody", "GrantLayer"]

GrantLayer = Literal["working", "archive", "episodic", "persona", "graph"]


class GrantBody(BaseModel):
    """A grant of read access to a scope of the owner's memory, for another tenant; pending until confirmed."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)

    grantee_tenant: NotBlank = Field(
        ..., max_length=200, description="The tenant whose API keys may read under the grant (not the owner's own)."
    )
    layers: list[GrantLayer] = Field(..., min_length=1, max_length=5, description="The layers the grant covers.")
    topics: list[NotBlank] = Field(
        [], max_length=100, description="The topics it covers (an item's messages carry one); empty: every topic."
    )
    from_: Time | None = Field(
        None, alias="from", description="Earliest event time of a covered item (RFC 3339 or ms; absent: no bound)."
    )
    until: Time | None = Field(None, description="Latest event time of a covered item (absent: no bound).")
    include_sensitive: bool = Field(
        False,
        description="Whether shared answers keep e-mail addresses, phone, ID and card numbers and health terms "
        "(false: each is masked, e.g. [phone]).",
    )
    expires_at: Time | None = Field(None, description="When the grant stops giving access (absent: never).")
    reason: str = Field("", max_length=500, description="Why, kept with the grant (audit).")
    wait_ms: WaitMs = Field(
        5000, description=f"How long to wait until the grant is in memory, in milliseconds (at most {MAX_WAIT_MS})."
    )


class GrantChangeBody(BaseModel):
    """Options of a confirmation or a revocation."""

    model_config = ConfigDict(extra="forbid", strict=True)

    reason: str = Field("", max_length=500, description="Why (audit).")
    wait_ms: WaitMs = Field(
        5000, description=f"How long to wait until memory reflects it, in milliseconds (at most {MAX_WAIT_MS})."
    )


class GrantAnswer(BaseModel):
    """One grant of the owner's memory to another tenant, as memory holds it."""

    grant_id: str = Field(..., description="The grant's id: the owner confirms or revokes it by this id.")
    tenant: str = Field(..., description="The owner's tenant.")
    user_id: str = Field(..., description="The owner.")
    grantee_tenant: str = Field(..., description="The tenant whose keys read under it.")
    status: Literal["pending", "active", "revoked"] = Field(
        ..., description="pending: not confirmed yet, gives no access; active: gives access; revoked: for good."
    )
    layers: list[str] = Field(..., description="The layers it covers.")
    topics: list[str] = Field(..., description="The topics it covers (empty: every topic).")
    from_: str | None = Field(None, alias="from", description="Earliest event time of a covered item.")
    until: str | None = Field(None, description="Latest event time of a covered item.")
    include_sensitive: bool = Field(..., description="Whether sensitive data is shown unmasked.")
    expires_at: str | None = Field(None, description="When it stops giving access.")
    granted_at: str | None = Field(None, description="When it was granted.")
    confirmed_at: str | None = Field(None, description="When it was confirmed.")
    revoked_at: str | None = Field(None, description="When it was revoked.")
    reason: str = Field("", description="Why it was granted.")
