"""The HTTP query service: FastAPI over the projections, with tenant API keys."""

from adamem.api.app import create_app

__all__ = ["create_app"]
