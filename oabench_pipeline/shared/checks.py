"""Asset checks that tell the truth in the UI, including when a blocking one stops the write.

Dagster records an `AssetCheckResult` the moment the asset yields it, even when the step fails right
after (the evaluation is stored as failed and shows on the asset's Checks tab). Returning check results
with a `MaterializeResult` would record the materialization too, and raising before yielding them leaves
the checks "not evaluated". So a blocking failure yields every evaluation, then raises: the checks show
what was wrong, the step fails, the partition is marked failed and its file keeps its last good rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from dagster import (
    AssetCheckKey,
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    Failure,
    MetadataValue,
)

MAX_LISTED = 10


def check_specs(asset: str, descriptions: Mapping[str, str], blocking: Iterable[str]) -> list[AssetCheckSpec]:
    """One spec per check, each with the description the Checks tab shows."""
    blocking = set(blocking)
    return [
        AssetCheckSpec(name, asset=asset, description=description, blocking=name in blocking)
        for name, description in descriptions.items()
    ]


def problems_result(
    name: str,
    problems: list[str],
    severity: AssetCheckSeverity = AssetCheckSeverity.ERROR,
    summary: str | None = None,
) -> AssetCheckResult:
    """A check result from the problems it found (none: passed), listing the first few after `summary`."""
    listed = "; ".join(problems[:MAX_LISTED]) + (
        f" (+{len(problems) - MAX_LISTED} more)" if len(problems) > MAX_LISTED else ""
    )
    if problems and summary:
        listed = f"{summary}: {listed}"
    return AssetCheckResult(
        check_name=name,
        passed=not problems,
        severity=severity,
        metadata={"problems": MetadataValue.text(listed or "none"), "count": len(problems)},
    )


def stop_on_blocking_failures(
    results: list[AssetCheckResult], blocking: Iterable[str | AssetCheckKey], what: str
) -> Iterator[AssetCheckResult]:
    """When a blocking check failed: record every evaluation, then fail the step before anything is written.

    Use as `yield from stop_on_blocking_failures(...)` in a generator asset; yields nothing when the
    blocking checks pass (the results then travel with the `MaterializeResult`).
    """
    blocking = set(blocking)
    failing = [r for r in results if _is_blocking(r, blocking) and not r.passed]
    if not failing:
        return
    yield from results
    lines = [f"{what}: {len(failing)} blocking check(s) failed, nothing was written:"]
    for result in failing:
        problems = result.metadata.get("problems") or result.metadata.get("problem")
        detail = getattr(problems, "value", None) or getattr(problems, "text", None)
        lines.append(f"- {_name(result)}" + (f": {detail}" if detail else ""))
    raise Failure(
        description="\n".join(lines),
        metadata={"failed_checks": ", ".join(_name(r) for r in failing)},
    )


def _is_blocking(result: AssetCheckResult, blocking: set[str | AssetCheckKey]) -> bool:
    """`blocking` names checks (one asset) or holds check keys (a multi-asset, where names repeat)."""
    if result.check_name in blocking:
        return True
    return (
        result.asset_key is not None and AssetCheckKey(result.asset_key, str(result.check_name)) in blocking
    )


def _name(result: AssetCheckResult) -> str:
    """`check`, or `asset.check` when the result names its asset (a multi-asset's checks)."""
    if result.asset_key is None:
        return str(result.check_name)
    return f"{result.asset_key.to_user_string()}.{result.check_name}"
