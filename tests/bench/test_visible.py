"""``adamem bench visible`` on a few messages: it measures the real service and its figures hang together."""

from __future__ import annotations

from pathlib import Path

from bench.visible import run
from tests.conftest import LOCOMO


def test_publish_to_visible_is_measured_on_a_real_embedded_service(tmp_path: Path) -> None:
    result = run(LOCOMO, samples=3, owners=2, preload=5, work=str(tmp_path / "work"))
    assert result["mode"] == "embedded"
    for key in ("visible_add_ms", "visible_poll_ms", "baseline_publish_ms", "baseline_query_ms"):
        assert result[key]["n"] == 3, key
    # add is a publish and then a wait: it cannot take less than the publish alone, sample by sample
    assert result["visible_add_ms"]["p50"] >= result["baseline_publish_ms"]["p50"]
    assert result["health_after"]["lag"]["analysis"] == 0 and result["health_after"]["lag"]["projection"] == 0
    assert (tmp_path / "work" / "data" / "log" / "adamem.messages").is_dir()
