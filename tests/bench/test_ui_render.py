"""The UI render benchmark asks for timeline pages the owner has."""

from __future__ import annotations

from bench.ui_render import PANELS, panels_for


def test_a_small_owners_page_panel_asks_for_its_last_page() -> None:
    small = dict(panels_for(1_200))
    assert small["timeline page 12"].endswith("/timeline?page=12")  # 100 messages a page: 12 pages
    assert "timeline page 50" not in small and len(small) == len(PANELS)
    assert panels_for(100_000) == PANELS and dict(panels_for(0))["timeline page 1"].endswith("page=1")
