"""The e5-pair embedder: multilingual e5 beside English e5-small-v2, read from its Maven jar as installed."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from adamem.analysis import pair
from adamem.analysis.e5 import E5Embedder
from adamem.analysis.factory import build_embedder
from adamem.analysis.pair import E5SmallV2, PairedEmbedder
from adamem.errors import ConfigError
from adamem.settings import Settings

ENGLISH = [
    "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
    "Melanie: I painted a lake sunrise last year; painting is how I relax.",
    "Why did I start working out?",
]
CHINESE = ["今天拿到了年度体检报告，血脂偏高。", "我为什么开始健身？"]


@pytest.fixture(scope="module")
def e5() -> E5Embedder:
    return E5Embedder()


@pytest.fixture(scope="module")
def v2() -> E5SmallV2:
    return E5SmallV2()


@pytest.fixture(scope="module")
def paired(e5: E5Embedder, v2: E5SmallV2) -> PairedEmbedder:
    return PairedEmbedder(e5, v2)


def test_an_english_vector_is_both_models_halves_and_its_cosine_their_mean(
    paired: PairedEmbedder, e5: E5Embedder, v2: E5SmallV2
) -> None:
    vectors = np.array(paired.embed(ENGLISH))
    question = np.array(paired.embed_query(["What does Melanie do to relax?"])[0])
    assert vectors.shape == (3, 768) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    first = np.array(e5.embed(ENGLISH))
    second = np.array([v2.encode("passage: " + t) for t in ENGLISH])
    assert np.allclose(vectors[:, :384] * np.sqrt(2), first) and np.allclose(vectors[:, 384:] * np.sqrt(2), second)
    asked = (
        np.array(e5.embed_query(["What does Melanie do to relax?"])[0]),
        np.array(v2.encode("query: What does Melanie do to relax?")),
    )
    assert np.allclose(vectors @ question, (first @ asked[0] + second @ asked[1]) / 2)
    assert int(np.argmax(vectors @ question)) == 1  # the painting, not the support group


def test_a_chinese_text_is_e5_alone_with_the_english_half_left_out(paired: PairedEmbedder, e5: E5Embedder) -> None:
    """The English model reads most Chinese characters as unknown pieces: its half is zeros, e5's at full length."""
    vectors = paired.embed(CHINESE)
    question = paired.embed_query(["我为什么开始健身？"])[0]
    for got, alone in zip(vectors, e5.embed(CHINESE), strict=True):
        assert got[:384] == alone and not any(got[384:])
    assert question[:384] == e5.embed_query(["我为什么开始健身？"])[0] and not any(question[384:])


def test_a_text_has_the_same_vector_bit_for_bit_whatever_it_is_embedded_with(paired: PairedEmbedder) -> None:
    alone = [paired.embed([t])[0] for t in ENGLISH + CHINESE]
    together = paired.embed(list(reversed(ENGLISH + CHINESE)))[::-1]
    assert alone == together
    assert paired.embed_query(["Why did I start working out?"]) == paired.embed_query(["Why did I start working out?"])


def test_an_empty_text_gets_a_unit_vector(paired: PairedEmbedder) -> None:
    for vector in paired.embed(["", "   "]):
        assert len(vector) == 768 and abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5


def test_the_factory_builds_it_by_name_and_records_both_models(paired: PairedEmbedder) -> None:
    built = build_embedder(Settings(embedder="e5-pair"))
    assert isinstance(built, PairedEmbedder) and built.dim == 768 and built.name == paired.name
    assert built.name.startswith("multilingual-e5-small") and f"+e5-small-v2-q/{pair.ARTIFACT}-" in built.name
    with pytest.raises(ConfigError, match="e5, e5-pair, openai"):
        build_embedder(Settings(embedder="e5-trio"))


def test_a_jar_other_than_the_measured_one_is_refused(tmp_path: Path) -> None:
    forged = tmp_path / pair.JAR
    with zipfile.ZipFile(pair.find_jar()) as real, zipfile.ZipFile(forged, "w") as copy:
        for name in real.namelist():
            data = real.read(name)
            copy.writestr(name, data + b" " if name.endswith("tokenizer.json") else data)
    with pytest.raises(ConfigError, match="SHA-256"):
        E5SmallV2(forged)


def test_without_the_jar_the_error_says_where_it_looked_and_how_to_fetch_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ADAMEM_MODELS", str(tmp_path / "models"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    with pytest.raises(ConfigError) as refused:
        E5SmallV2()
    message = str(refused.value)
    assert str(tmp_path / "models") in message and "deploy/setup.sh" in message
    assert f"{pair.GROUP}:{pair.ARTIFACT}:{pair.VERSION}" in message


def test_adamem_models_names_the_folder_it_is_read_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / pair.JAR).write_bytes(pair.find_jar().read_bytes())
    monkeypatch.setenv("ADAMEM_MODELS", str(tmp_path))
    assert pair.find_jar() == tmp_path / pair.JAR


def test_the_image_and_setup_fetch_the_jar_the_embedder_checks() -> None:
    root = Path(__file__).resolve().parents[2]
    assert f"-Dartifact={pair.GROUP}:{pair.ARTIFACT}:{pair.VERSION}" in (root / "Dockerfile").read_text()
    assert "/usr/local/share/adamem/models/" in (root / "Dockerfile").read_text()  # sys.prefix of the image's Python
    setup = (root / "deploy/setup.sh").read_text()
    assert f"artifact={pair.GROUP}:{pair.ARTIFACT}:{pair.VERSION}\n" in setup and f"jar={pair.JAR}\n" in setup
