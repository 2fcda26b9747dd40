"""`oabench`: a thin command line over the same Dagster assets the UI shows.

One module per command (`ingest`, `run`, `import_runs`, `status`, `sql`, `leaderboard`, `audit_keys`, `site`,
`catalogue`, `models`, `ui`, `judge`), registered on the group `main` (`group.py`); what several share in `common.py`, what they
draw in `output.py`.
"""

from oabench_pipeline.settings import SettingsError, apply_dagster_defaults

try:  # before any command module imports Dagster, which reads them once, when it is imported
    apply_dagster_defaults()
except SettingsError as error:
    raise SystemExit(f"Error: {error}") from None

from oabench_pipeline.cli import (  # noqa: F401 (registers each command)
    audit_keys,
    batches,
    catalogue,
    import_runs,
    ingest,
    judge,
    leaderboard,
    models,
    run,
    site,
    sql,
    status,
    ui,
)
from oabench_pipeline.cli.group import main

__all__ = ["main"]
