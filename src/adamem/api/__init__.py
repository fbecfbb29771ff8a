"""The HTTP query service (FastAPI over the projections, with tenant API keys) and its Python client.

``create_app`` is loaded on first use, so that ``adamem.api.client`` — the client a user imports
into an application — does not pull in the service, the store and the retriever.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from adamem.api.app import create_app

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from adamem.api.app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
