"""Build the Memory Agent's parts from settings: the one place that maps names to adapters."""

from __future__ import annotations

from adamem.analysis import Embedder, Extractor
from adamem.analysis.agent import MemoryAgent
from adamem.errors import ConfigError
from adamem.settings import Settings

__all__ = ["build_agent", "build_embedder", "build_extractor"]


def build_extractor(settings: Settings) -> Extractor:
    """The extractor named by ``ADAMEM_EXTRACTOR``."""
    if settings.extractor == "rules":
        from adamem.analysis.rules import RuleExtractor

        return RuleExtractor()
    if settings.extractor == "openai":
        from adamem.analysis.llm import OpenAICompatibleExtractor

        if not settings.llm_url or not settings.llm_model:
            raise ConfigError("ADAMEM_EXTRACTOR=openai needs ADAMEM_LLM_URL and ADAMEM_LLM_MODEL")
        return OpenAICompatibleExtractor(settings.llm_url, settings.llm_model, settings.llm_api_key or None)
    raise ConfigError(f"ADAMEM_EXTRACTOR={settings.extractor!r} is not one of: rules, openai")


def build_embedder(settings: Settings) -> Embedder:
    """The embedder named by ``ADAMEM_EMBEDDER``."""
    if settings.embedder == "e5":
        from adamem.analysis.e5 import E5Embedder

        return E5Embedder()
    if settings.embedder == "openai":
        from adamem.analysis.llm import OpenAICompatibleEmbedder

        if not settings.embed_url or not settings.embed_model or settings.embed_dim <= 0:
            raise ConfigError("ADAMEM_EMBEDDER=openai needs ADAMEM_EMBED_URL, ADAMEM_EMBED_MODEL and ADAMEM_EMBED_DIM")
        return OpenAICompatibleEmbedder(
            settings.embed_url, settings.embed_model, settings.embed_dim, settings.llm_api_key or None
        )
    raise ConfigError(f"ADAMEM_EMBEDDER={settings.embedder!r} is not one of: e5, openai")


def build_agent(settings: Settings) -> MemoryAgent:
    """The Memory Agent with the configured extractor and embedder."""
    return MemoryAgent(build_extractor(settings), build_embedder(settings))
