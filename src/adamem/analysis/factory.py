"""Build the Memory Agent's parts from settings: the one place that names the adapters of the analysis ports."""

from __future__ import annotations

import importlib

from adamem.analysis import Embedder, Extraction, Extractor
from adamem.analysis.agent import MemoryAgent
from adamem.errors import ConfigError
from adamem.events import ChatMessage
from adamem.packs import PackSelection
from adamem.settings import Settings

__all__ = ["NoExtractor", "build_agent", "build_embedder", "build_extractor"]


class NoExtractor:
    """Extracts nothing: a generation of messages and their vectors only (working memory and the
    message graph), the cheapest analysis and the "messages only" baseline."""

    name: str = "none"
    version: str = "1"
    model: str = ""

    def extract(self, message: ChatMessage) -> Extraction:
        """An empty analysis."""
        return Extraction()


def _plugin(spec: str) -> Extractor:
    """``package.module:factory`` — an extractor of your own, made by calling ``factory()``."""
    module_name, _, attr = spec.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"ADAMEM_EXTRACTOR={spec!r}: cannot import {attr!r} from {module_name!r} ({exc})") from exc
    extractor = factory()
    missing = [a for a in ("name", "version", "model", "extract") if not hasattr(extractor, a)]
    if missing:
        raise ConfigError(f"ADAMEM_EXTRACTOR={spec!r} made an object without {', '.join(missing)}")
    return extractor  # type: ignore[no-any-return]


def build_extractor(settings: Settings) -> Extractor:
    """The extractor named by ``ADAMEM_EXTRACTOR`` (rules, openai, none, ``package.module:factory``), with the
    settings' domain packs (``adamem.packs``) around it when any tenant has some."""
    extractor = _base_extractor(settings)
    selection = PackSelection.chosen(settings.packs, settings.packs_record)
    if not selection.by_tenant:
        return extractor
    from adamem.analysis.packs import PackExtractor

    return PackExtractor(extractor, selection)


def _base_extractor(settings: Settings) -> Extractor:
    if settings.extractor == "none":
        return NoExtractor()
    if ":" in settings.extractor and not settings.extractor.startswith(":"):
        return _plugin(settings.extractor)
    if settings.extractor == "rules":
        from adamem.analysis.rules import RuleExtractor

        return RuleExtractor()
    if settings.extractor == "openai":
        from adamem.analysis.llm import OpenAICompatibleExtractor

        if not settings.llm_url or not settings.llm_model:
            raise ConfigError("ADAMEM_EXTRACTOR=openai needs ADAMEM_LLM_URL and ADAMEM_LLM_MODEL")
        return OpenAICompatibleExtractor(settings.llm_url, settings.llm_model, settings.llm_api_key or None)
    raise ConfigError(
        f"ADAMEM_EXTRACTOR={settings.extractor!r} is not one of: rules, openai, none, package.module:factory"
    )


def build_embedder(settings: Settings) -> Embedder:
    """The embedder named by ``ADAMEM_EMBEDDER`` (``e5-pair`` unless set)."""
    if settings.embedder == "e5":
        from adamem.analysis.e5 import E5Embedder

        return E5Embedder()
    if settings.embedder == "e5-pair":
        from adamem.analysis.e5 import E5Embedder
        from adamem.analysis.pair import E5SmallV2, PairedEmbedder

        return PairedEmbedder(E5Embedder(), E5SmallV2())
    if settings.embedder == "openai":
        from adamem.analysis.llm import OpenAICompatibleEmbedder

        if not settings.embed_url or not settings.embed_model or settings.embed_dim <= 0:
            raise ConfigError("ADAMEM_EMBEDDER=openai needs ADAMEM_EMBED_URL, ADAMEM_EMBED_MODEL and ADAMEM_EMBED_DIM")
        return OpenAICompatibleEmbedder(
            settings.embed_url, settings.embed_model, settings.embed_dim, settings.llm_api_key or None
        )
    raise ConfigError(f"ADAMEM_EMBEDDER={settings.embedder!r} is not one of: e5, e5-pair, openai")


def build_agent(settings: Settings) -> MemoryAgent:
    """The Memory Agent with the configured extractor and embedder, writing the settings' generation."""
    return MemoryAgent(build_extractor(settings), build_embedder(settings), settings.generation)
