"""The watch policy: which new catalogue models to benchmark by themselves, on what, and within what budget.

The owner writes it (`watch.toml`, or the file `OABENCH_WATCH_FILE` names); without the file there is no
policy and the catalogue sensor registers nothing. One `[watch]` table:

    [watch]
    include = ["openai/", "anthropic/"]   # id prefixes taken (default: every id)
    exclude = ["openai/gpt-5-pro"]        # ids never taken
    created_after = 2026-01-01            # only models the catalogue added after this day (UTC)
    suite = "oabench-2026"                # the editions to run (a suite of the editions registry)
    protocols = ["direto"]                # one registry entry per protocol
    max_run_cost_usd = 5.0                # ceiling on one model's estimated cost on the suite
    monthly_budget_usd = 20.0             # every automatic run of a calendar month (UTC) together
    base_url = "https://openrouter.ai/api/v1"   # the endpoint the new entries call
    api_key_env = "OPENROUTER_API_KEY"
    concurrency = 20
    reserved_completion_tokens = 16384   # completion tokens a request's budget hold assumes at most

Validated like the models registry: strict types, unknown fields refused, every error as
`file:line: field 'x': problem`. The budgets are required: a policy that could spend without a limit is
not a policy.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import tomllib
from collections.abc import Collection
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from oabench_pipeline.core.models_registry import (
    DEFAULT_API_KEY_ENV,
    DEFAULT_BASE_URL,
    DEFAULT_CONCURRENCY,
    base_url_problem,
    link_local_problem,
    safe_name_problem,
)
from oabench_pipeline.core.prompts import Protocol
from oabench_pipeline.core.toml_errors import (
    TomlFileError,
    field_line,
    nesting_error,
    syntax_error,
    table_spans,
    validation_error,
)

_TABLE_HEADER = re.compile(r"^\s*\[\s*watch\s*\]")
# Completion tokens (reasoning included) one reply is assumed to use at most when its cost is held against a
# budget before it is sent (`inference/reservations.py`): the requests carry no max_tokens (the study's
# protocol), so this is an assumption for the budgets, not a cap sent to the model.
RESERVED_COMPLETION_TOKENS = 16_384
# The fields a decision rests on: when one changes, models the policy skipped are decided again.
DECISION_FIELDS = ("include", "exclude", "created_after", "suite", "protocols", "max_run_cost_usd")


class WatchPolicyError(TomlFileError):
    """A watch policy that cannot be used; the message names the file, the line and the field."""


class WatchPolicy(BaseModel):
    """The `[watch]` table. Strict: a quoted number or a misspelt field is an error, not a guess."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    include: tuple[str, ...] = Field((), description="Model id prefixes taken; empty: every id")
    exclude: tuple[str, ...] = Field((), description="Model ids never taken")
    created_after: dt.date | None = Field(None, description="Only models the catalogue added after this day")
    suite: str | None = Field(None, min_length=1, description="Suite to run; None: the registry's default")
    protocols: tuple[Protocol, ...] = Field(("direto",), min_length=1)
    max_run_cost_usd: float = Field(gt=0, allow_inf_nan=False)
    monthly_budget_usd: float = Field(gt=0, allow_inf_nan=False)
    base_url: str = DEFAULT_BASE_URL
    api_key_env: str | None = DEFAULT_API_KEY_ENV
    concurrency: int = Field(DEFAULT_CONCURRENCY, ge=1)
    reserved_completion_tokens: int = Field(
        RESERVED_COMPLETION_TOKENS,
        ge=0,
        description="Completion tokens a request's budget hold assumes at most (not sent to the model)",
    )

    @model_validator(mode="before")
    @classmethod
    def _lists_and_no_key(cls, data: Any) -> Any:
        """TOML arrays arrive as lists (the fields are tuples); `api_key_env = ""` means send no key."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for name in ("include", "exclude", "protocols"):
            if isinstance(data.get(name), list):
                data[name] = tuple(data[name])
        if data.get("api_key_env") in ("", False):
            data["api_key_env"] = None
        return data

    @field_validator("exclude")
    @classmethod
    def _ids_are_model_ids(cls, ids: tuple[str, ...]) -> tuple[str, ...]:
        for model_id in ids:
            if problem := safe_name_problem(model_id):
                raise ValueError(f"exclude: {problem}")
        return ids

    @field_validator("protocols")
    @classmethod
    def _protocols_once(cls, protocols: tuple[Protocol, ...]) -> tuple[Protocol, ...]:
        if len(set(protocols)) != len(protocols):
            raise ValueError(f"lists a protocol twice: {list(protocols)}")
        return protocols

    @field_validator("base_url")
    @classmethod
    def _base_url_is_usable(cls, url: str) -> str:
        problem = base_url_problem(url)
        if problem is None and (why := link_local_problem(urlsplit(url).hostname or "")):
            problem = f"{url!r} {why}; the entries it makes could not call it"
        if problem:
            raise ValueError(problem)
        return url

    def includes(self, model_id: str) -> bool:
        return not self.include or any(model_id.startswith(prefix) for prefix in self.include)

    @property
    def decision_sha256(self) -> str:
        """SHA-256 of the fields a decision rests on (not the budget: a budget skip is re-decided anyway)."""
        fields = self.model_dump(mode="json", include=set(DECISION_FIELDS))
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


def parse_watch_policy(text: str, path: Path, suites: Collection[str] | None = None) -> WatchPolicy:
    """Validate watch-policy TOML `text` (read from `path`, named in errors); with `suites` (the editions
    registry's suite names), a `suite` the registry does not define is an error at its line too."""
    lines = text.splitlines()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise syntax_error(WatchPolicyError, path, lines, error) from error
    except RecursionError:
        raise nesting_error(WatchPolicyError, path, lines) from None
    unknown = [k for k in data if k != "watch"]
    if unknown:
        line = next(
            (i + 1 for i, t in enumerate(lines) if re.match(rf"^\s*\[*\s*{re.escape(unknown[0])}", t)), 1
        )
        raise WatchPolicyError(
            path, line, unknown[0], "unknown top-level entry; only a [watch] table belongs here"
        )
    table = data.get("watch")
    if not isinstance(table, dict):
        raise WatchPolicyError(path, 1, "watch", "no [watch] table: the policy is its [watch] table")
    spans = table_spans(lines, _TABLE_HEADER)
    span = spans[0] if spans else None
    try:
        policy = WatchPolicy.model_validate(table)
    except ValidationError as error:
        raise validation_error(WatchPolicyError, path, lines, span, error, table="[watch] table") from error
    if suites is not None and policy.suite is not None and policy.suite not in suites:
        problem = f"unknown suite {policy.suite!r}; the editions registry has: {', '.join(suites)}"
        raise WatchPolicyError(path, field_line(lines, span, "suite"), "suite", problem)
    return policy


def load_watch_policy(path: Path, suites: Collection[str] | None = None) -> WatchPolicy | None:
    """The policy in `path`; None when there is no such file (no policy). Raises `WatchPolicyError`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        raise WatchPolicyError(path, None, None, f"cannot read the watch policy: {error}") from error
    return parse_watch_policy(text, path, suites)
