"""Every asset check says what it checks: the UI's Checks tab shows this text, not "No description"."""

from __future__ import annotations

from oabench_pipeline.definitions import build_definitions
from oabench_pipeline.settings import Settings


def test_every_asset_check_has_a_description() -> None:
    defs = build_definitions(Settings.from_env())
    specs = [spec for assets_def in defs.assets or [] for spec in assets_def.check_specs]
    assert len(specs) >= 18
    undescribed = [spec.key.to_user_string() for spec in specs if not (spec.description or "").strip()]
    assert undescribed == []
