"""Downstream follows upstream: scores and the leaderboard rebuild themselves when their inputs change.

"Changed" is Dagster's own versions: every asset reports a data version with each materialization
(a SHA-256 of what it holds: `core/versions.py`; the PDFs' pins for `exam_pdfs`) and the computing
assets carry a code version (`core/`: the parsers', scoring's, the analysis' and the report's). A
re-materialization that produces the same rows — a forced re-ingest parsing the same questions, a rerun
of a complete cell, a re-score that changes no row — keeps its version and re-runs nothing downstream;
a changed row, or a bumped code version, does. The UI's "stale" marks come from the same versions.
Evaluated by one `AutomationConditionSensorDefinition` (`downstream_automation`: automation/downstream.py):

- `scores` (one partition per cell) uses `on_changed_inputs()`, Dagster's `eager()` with "a dependency
  was updated" narrowed to "a dependency's data version changed" and widened by "this asset's code
  version changed": a cell is re-scored when its own `inferences` partition, or its edition's
  `answer_keys` / `questions`, changed by a run that did not score it already (`oabench run` materializes
  inferences and scores together: nothing left to do), and every cell is re-scored once after a
  `SCORING_VERSION` bump. Only those cells are requested; a cell whose inferences are missing waits.
- `leaderboard` and every other analysis table (`tables.ANALYSIS_TABLES`: unpartitioned assets of one
  multi-asset step, each reading every scored cell) use `after_any_upstream_change()`: it fires once
  when any upstream partition's data version changed (or the tables' code version did) since the tables
  were last requested, and waits while a scores cell is due on the same tick or any input is being
  materialized, so a burst of re-scored cells costs one rebuild, and never before a first cell is
  scored (the step could only fail). The tables share their inputs, so they
  are requested together, and run as one step. Unlike `eager()` it ignores missing upstream partitions:
  a cell never run (an API model without a key) must not block it forever.
- `leaderboard_report` uses `on_changed_inputs()`: it is requested in the same run as the tables it
  renders, and not after a rebuild that left every table as it was.
- `leaderboard_site` uses the same condition once the site exists: the first build is asked for
  (`oabench site`, or Materialize in the UI; it writes thousands of files, which nobody asked for by
  running a model), and from then on it follows the tables it renders like the report.

The sensor is RUNNING by default, like the portal and registry sensors: a stale leaderboard after an
automated run is the failure it exists to prevent. Turn it off with the toggle in the UI (Automation
page; a state set there wins over the code default) or for a whole deployment with
`OABENCH_AUTOMATION=off` (read in `settings.py`), which makes its default status STOPPED.
"""

from __future__ import annotations

from dagster import AssetSelection, AutomationCondition


def code_version_changed() -> AutomationCondition:
    """Dagster's `code_version_changed()`, typed to combine with conditions on assets or checks.

    It is an asset-only condition (`AutomationCondition[AssetKey]`) and the generic parameter is invariant,
    so a type checker refuses `|` and `since_last_handled()` between it and `eager()`'s operands; every
    asset it is applied to here is an asset.
    """
    condition: AutomationCondition = AutomationCondition.code_version_changed()
    return condition


def data_changed_elsewhere() -> AutomationCondition:
    """The data version changed since the previous tick, by a run that did not also build the root asset.

    `data_version_changed` compares the newest data version recorded after the previous tick with the
    newest before it, partition by partition: a materialization with the same version is no change.
    """
    changed: AutomationCondition = AutomationCondition.data_version_changed()  # asset-only: see above
    return (changed & ~AutomationCondition.executed_with_root_target()).with_label(
        "data_version_changed_elsewhere"
    )


def on_changed_inputs() -> AutomationCondition:
    """`eager()`, reading "a dependency updated" as "its data version changed", or our code version did.

    Dagster 1.13's `eager()` is this tree with `newly_updated()` where `data_version_changed()` is and
    without `code_version_changed()`; the rest (newly missing partitions, dependencies requested on the
    same tick, nothing missing or in flight) is unchanged.
    """
    dep_changed = AutomationCondition.any_deps_match(
        data_changed_elsewhere() | AutomationCondition.will_be_requested()
    ).with_label("any_dep_data_changed")
    return (
        AutomationCondition.in_latest_time_window()
        & (AutomationCondition.newly_missing() | dep_changed | code_version_changed()).since_last_handled()
        & ~AutomationCondition.any_deps_missing()
        & ~AutomationCondition.any_deps_in_progress()
        & ~AutomationCondition.in_progress()
    ).with_label("on_changed_inputs")


SCORES_CONDITION = on_changed_inputs()


def after_any_upstream_change() -> AutomationCondition:
    """True once after any partition of any dependency changed its data version (or this asset changed its
    code version), when nothing upstream is in flight.

    Without `will_be_requested`: an unpartitioned table over many cells is rebuilt on the tick after the
    cells landed, not in a backfill mixed with them. Changes made by a run that also materialized this
    asset (e.g. `oabench run` rebuilding the leaderboard itself) do not count.
    """
    changed = (
        AutomationCondition.any_deps_match(data_changed_elsewhere()).with_label("any_dep_data_changed")
        | code_version_changed()
    )
    # Cells due on this very tick (scores of cells whose inferences just landed) come first: the trigger
    # stays true until the table is requested, so it fires once they are done. `will_be_requested` cannot
    # say this: it only sees dependencies that can run in the same run (same partitions definition).
    upstream_requested = AutomationCondition.any_deps_match(SCORES_CONDITION).allow(
        AssetSelection.assets("scores")
    )
    # Nothing to rank before a first cell is scored: the tables' step fails "nothing is scored yet", and on
    # a fresh instance the editions/models tables the sensors build would make that red run the first one.
    any_scored = (
        AutomationCondition.any_deps_match(~AutomationCondition.missing())
        .allow(AssetSelection.assets("scores"))
        .with_label("any_cell_scored")
    )
    return (
        changed.since_last_handled()
        & any_scored
        & ~upstream_requested.with_label("scores_due_this_tick")
        & ~AutomationCondition.any_deps_in_progress()
        & ~AutomationCondition.in_progress()
    ).with_label("after_any_upstream_change")


LEADERBOARD_CONDITION = after_any_upstream_change()
REPORT_CONDITION = on_changed_inputs()
SITE_CONDITION = (on_changed_inputs() & ~AutomationCondition.missing()).with_label(
    "on_changed_inputs_once_built"
)
