"""Adapters for OpenAI-compatible HTTP endpoints: an LLM extractor and an embedder.

Standard library only (``urllib.request`` + ``json``). Both POST JSON to ``{base_url}/…``, retry
with exponential backoff on HTTP 429/5xx and timeouts, and translate failures into this
module's errors (subclasses of ``AdaMemError``)::

    AdaMemError
    ├── ModelUnavailable      the endpoint cannot be reached, keeps failing, or refuses the request
    └── MalformedModelAnswer  the endpoint answered, but not with what was asked for
"""

from __future__ import annotations

import http.client
import json
import math
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

from adamem.analysis import Extraction
from adamem.analysis.llm_schema import EXTRACTION_SCHEMA, SYSTEM_PROMPT, parse_extraction, user_prompt
from adamem.errors import MalformedModelAnswer, ModelUnavailable
from adamem.events import ChatMessage

__all__ = ["ChatEndpoint", "OpenAICompatibleEmbedder", "OpenAICompatibleExtractor"]


class ChatEndpoint:
    """POSTs JSON to one OpenAI-compatible endpoint with retries (the extractor, the embedder, the compressor)."""

    def __init__(self, base_url: str, api_key: str | None, timeout_s: float, retries: int, backoff_s: float) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.retries = max(0, retries)
        self.backoff_s = backoff_s

    def post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        """The decoded JSON answer of ``POST {base_url}{path}``; raises ``ModelUnavailable`` when it cannot get one."""
        url = f"{self.base_url}{path}"
        body = json.dumps(payload).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last_problem = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            request = urllib.request.Request(url, data=body, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    raw = response.read()
            except urllib.error.HTTPError as exc:
                detail = _error_detail(exc)
                exc.close()
                if exc.code == 429 or exc.code >= 500:
                    last_problem = f"HTTP {exc.code}{detail}"
                    continue
                raise ModelUnavailable(
                    f"{url} refused the request with HTTP {exc.code}{detail}. Check the base URL, the model name "
                    "and the API key (ADAMEM settings for the OpenAI-compatible extractor/embedder)."
                ) from None
            except urllib.error.URLError as exc:
                if isinstance(exc.reason, TimeoutError):
                    last_problem = f"no answer within {self.timeout_s:g}s"
                    continue
                raise ModelUnavailable(
                    f"cannot reach {url} ({exc.reason}). Start the model server or fix the base URL; "
                    "or use the offline rule extractor instead."
                ) from exc
            except TimeoutError:
                last_problem = f"no answer within {self.timeout_s:g}s"
                continue
            except (ConnectionError, http.client.HTTPException) as exc:
                last_problem = f"connection failed ({exc.__class__.__name__}: {exc})"
                continue
            try:
                decoded = json.loads(raw)
            except ValueError as exc:
                raise MalformedModelAnswer(f"{url} answered with invalid JSON: {raw[:200]!r}") from exc
            if not isinstance(decoded, dict):
                raise MalformedModelAnswer(f"{url} answered with JSON that is not an object: {raw[:200]!r}")
            return decoded
        raise ModelUnavailable(
            f"{url} kept failing after {self.retries + 1} attempt(s); last: {last_problem}. Check that the model "
            "server is healthy (and not overloaded), raise timeout_s/retries, or use the offline rule extractor."
        )


def _error_detail(exc: urllib.error.HTTPError) -> str:
    try:
        text = exc.read(300).decode("utf-8", "replace").strip()
    except (OSError, http.client.HTTPException):
        return ""
    return f": {text}" if text else ""


class OpenAICompatibleExtractor:
    """Memory Agent extractor backed by an LLM behind an OpenAI-compatible ``/chat/completions`` endpoint."""

    name: str = "openai"
    version: str = "1"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        retries: int = 2,
        backoff_s: float = 0.5,
        temperature: float = 0.0,
    ) -> None:
        self.model = model
        self.temperature = temperature
        self._endpoint = ChatEndpoint(base_url, api_key, timeout_s, retries, backoff_s)

    def extract(self, message: ChatMessage) -> Extraction:
        """Ask the model for the analysis of one message and validate its JSON answer."""
        payload = {
            "model": self.model,
            "temperature": self.temperature,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": user_prompt(message)},
            ],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "extraction", "strict": True, "schema": EXTRACTION_SCHEMA},
            },
        }
        answer = self._endpoint.post("/chat/completions", payload)
        url = f"{self._endpoint.base_url}/chat/completions"
        try:
            content = answer["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise MalformedModelAnswer(
                f"{url} answered without choices[0].message.content (message {message.event_id}): "
                f"{json.dumps(answer)[:300]}"
            ) from None
        if not isinstance(content, str):
            raise MalformedModelAnswer(f"{url} answered with non-text content for message {message.event_id}")
        try:
            data = json.loads(_strip_fences(content))
        except ValueError:
            raise MalformedModelAnswer(
                f"{url} (model {self.model}) did not answer with JSON for message {message.event_id}: {content[:300]!r}"
            ) from None
        try:
            return parse_extraction(data)
        except ValueError as exc:
            raise MalformedModelAnswer(
                f"{url} (model {self.model}) answered with an invalid extraction for message {message.event_id}: {exc}"
            ) from None


def _strip_fences(content: str) -> str:
    """Models without structured output often wrap JSON in ```json fences."""
    text = content.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    return text


class OpenAICompatibleEmbedder:
    """Embedder backed by an OpenAI-compatible ``/embeddings`` endpoint; returns L2-normalised vectors."""

    def __init__(
        self,
        base_url: str,
        model: str,
        dim: int,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        retries: int = 2,
        backoff_s: float = 0.5,
        batch_size: int = 64,
    ) -> None:
        self.model = model
        self.name = f"openai:{model}"
        self.dim = dim
        self.batch_size = max(1, batch_size)
        self._endpoint = ChatEndpoint(base_url, api_key, timeout_s, retries, backoff_s)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised vector of ``dim`` floats per text, in order."""
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start : start + self.batch_size])
            answer = self._endpoint.post("/embeddings", {"model": self.model, "input": batch})
            vectors.extend(self._vectors(answer, len(batch)))
        return vectors

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        """Questions embed like stored texts (OpenAI-style embedding models are symmetric)."""
        return self.embed(texts)

    def _vectors(self, answer: dict[str, Any], expected: int) -> list[list[float]]:
        url = f"{self._endpoint.base_url}/embeddings"
        data = answer.get("data")
        if not isinstance(data, list) or len(data) != expected:
            got = len(data) if isinstance(data, list) else "no"
            raise MalformedModelAnswer(f"{url} answered with {got} embeddings for {expected} input(s)")
        ordered = sorted(data, key=lambda item: item.get("index", 0) if isinstance(item, dict) else 0)
        vectors = []
        for item in ordered:
            raw = item.get("embedding") if isinstance(item, dict) else None
            numeric = isinstance(raw, list) and all(isinstance(x, int | float) and not isinstance(x, bool) for x in raw)
            if not isinstance(raw, list) or not numeric:
                raise MalformedModelAnswer(f"{url} answered with an embedding that is not a list of numbers")
            if len(raw) != self.dim:
                raise MalformedModelAnswer(
                    f"{url} (model {self.model}) returned {len(raw)}-dimensional vectors, expected {self.dim}; "
                    "set dim to the model's dimension"
                )
            norm = math.sqrt(sum(float(x) * float(x) for x in raw))
            vectors.append([float(x) / norm for x in raw] if norm > 0 else [0.0] * self.dim)
        return vectors
