"""The 2nd phase's Dagster assets: OAB-Bench's pinned files, items, answer standards and judge prompts
(`assets.py`), imported answers and judgments (`imports.py`), area-exam scores and the leaderboard
(`scoring.py`). The pure parts live in `core/phase2/`."""
