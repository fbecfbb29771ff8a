"""A compressor backed by a language model behind an OpenAI-compatible ``/chat/completions`` endpoint.

It writes the text of a cluster's summary; everything else (which records, the span, the ids, the
vector) is the rules' (``projections.compressor``), and the text is recorded on the event, so replay
never calls the model. The model is asked for one or two sentences in the records' language that
keep the time span, how often, and what motivates or characterises the activity. Failures are the
endpoint's (``ModelUnavailable``, ``MalformedModelAnswer``); an empty answer is malformed.
"""

from __future__ import annotations

import datetime as dt

from adamem.analysis.llm import ChatEndpoint
from adamem.errors import MalformedModelAnswer
from adamem.projections.compressor import Cluster, span_text

__all__ = ["SYSTEM_PROMPT", "OpenAICompatibleCompressor", "cluster_prompt"]

SYSTEM_PROMPT = (
    "You compress a person's memory records. Given records of one activity or topic with their dates, write "
    "one or two sentences that keep the time span, how often it happened, and what motivates or characterises "
    "it (reasons, preferred times, places, people). Write in the language of the records. Answer with the "
    "sentences only."
)


def cluster_prompt(cluster: Cluster, limit: int = 40) -> str:
    """The user prompt: the cluster's label and span, then its records (the latest ``limit``), one a line."""
    chinese = cluster.chinese
    lines = [f"{cluster.key} ({span_text(cluster.times[0], cluster.times[-1], chinese=chinese)}):"]
    for record, at in list(zip(cluster.records, cluster.times, strict=True))[-limit:]:
        day = dt.datetime.fromtimestamp(at / 1000, tz=dt.UTC).date().isoformat()
        lines.append(f"- {day}: {record.content}")
    return "\n".join(lines)


class OpenAICompatibleCompressor:
    """Summaries written by an LLM; its model is part of the recorded compressor version."""

    name: str = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        retries: int = 2,
        backoff_s: float = 0.5,
    ) -> None:
        self.model = model
        self.version = f"1/{model}"
        self._endpoint = ChatEndpoint(base_url, api_key, timeout_s, retries, backoff_s)

    def distil(self, cluster: Cluster, excerpts: int) -> str:
        """Ask the model for the summary of ``cluster`` (``excerpts`` is the rules' and is not used)."""
        payload = {
            "model": self.model,
            "temperature": 0.0,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": cluster_prompt(cluster)},
            ],
        }
        answer = self._endpoint.post("/chat/completions", payload)
        url = f"{self._endpoint.base_url}/chat/completions"
        try:
            content = answer["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise MalformedModelAnswer(
                f"{url} answered without choices[0].message.content (compressing {cluster.key!r} of {cluster.owner_id})"
            ) from None
        if not isinstance(content, str) or not content.strip():
            raise MalformedModelAnswer(
                f"{url} (model {self.model}) answered with no text for the summary of {cluster.key!r} of "
                f"{cluster.owner_id}; retry, or use the rules compressor"
            )
        return content.strip()
