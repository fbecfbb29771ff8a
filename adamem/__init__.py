"""AdaMem Stream: four-layer conversational memory as an event-sourced stream processor."""

__version__ = "0.1.0"
