"""Read an OpenAI-compatible endpoint's model list for prices (OpenRouter: `pricing.prompt` per token)."""

from __future__ import annotations

import datetime as dt


class PricingFetchError(RuntimeError):
    pass


def fetch_model_prices(
    base_url: str, api_key: str | None = None, timeout_s: float = 30.0, api_key_header: str = "Authorization"
) -> list[dict]:
    """One row per listed model with a price: `model`, prompt and completion USD per token.

    The key goes in the model's header, as for chat calls; `{base path}/models?{query}` keeps the query.
    """
    import httpx  # here: every run's process loads this module with the Dagster definitions, few fetch prices

    headers: dict[str, str] = {}
    if api_key:
        bearer = api_key_header.lower() == "authorization"
        headers[api_key_header] = f"Bearer {api_key}" if bearer else api_key
    base = httpx.URL(base_url)
    url = base.copy_with(path=base.path.rstrip("/") + "/models")
    try:
        response = httpx.get(url, headers=headers, timeout=timeout_s)
        response.raise_for_status()
        listed = response.json().get("data", [])
    except (httpx.HTTPError, ValueError, AttributeError) as error:
        raise PricingFetchError(f"GET {url}: {type(error).__name__}") from None
    fetched_at = dt.datetime.now(dt.UTC)
    rows = []
    for item in listed:
        pricing = item.get("pricing") if isinstance(item, dict) else None
        if not isinstance(pricing, dict):
            continue
        try:
            prompt, completion = float(pricing["prompt"]), float(pricing["completion"])
        except (KeyError, TypeError, ValueError):
            continue
        rows.append(
            {
                "fetched_at": fetched_at,
                "base_url": base_url,
                "model": str(item.get("id")),
                "prompt_price_per_token": prompt,
                "completion_price_per_token": completion,
            }
        )
    return rows
