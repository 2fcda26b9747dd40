"""The SQL that recomputes each figure the site shows, from the scored answers (the Dados page lists it).

Each query runs as is with `oabench sql "..."` over the warehouse views, and a test runs every one and
compares its result with the leaderboard tables the pages are drawn from: the recipe is the truth, not
a description of it.
"""

from __future__ import annotations

from dataclasses import dataclass

# The scored answers of the run each (model key, edition) counts: the newest complete one.
_CANONICAL = """canonical AS (
    SELECT s.* FROM scores AS s
    SEMI JOIN leaderboard_by_edition AS b
      ON b.model_key = s.model_key AND b.edition = s.edition AND b.run_id IS NOT DISTINCT FROM s.run_id
)"""

# Questions scored and annulled questions per edition (the key's status wins over the booklet's; an
# unresolved question is in neither score).
_EDITION_TOTALS = """totals AS (
    SELECT q.edition, count(*) FILTER (WHERE coalesce(k.status, q.status) <> 'unresolved') AS questions,
           count(*) FILTER (WHERE coalesce(k.status, q.status) = 'annulled') AS annulled,
           count(*) FILTER (WHERE coalesce(k.status, q.status) = 'active') AS active
    FROM questions AS q LEFT JOIN answer_keys AS k ON k.qid = q.qid GROUP BY q.edition
)"""

_PER_EDITION = """per_edition AS (
    SELECT c.model_key, c.edition, count(*) FILTER (WHERE c.is_correct_technical) AS technical_score,
           t.questions, t.annulled, t.active
    FROM canonical AS c JOIN totals AS t ON t.edition = c.edition
    GROUP BY c.model_key, c.edition, t.questions, t.annulled, t.active
)"""


@dataclass(frozen=True)
class Recipe:
    name: str
    title_pt: str
    title_en: str
    sql: str

    def title(self, lang: str) -> str:
        return self.title_pt if lang == "pt" else self.title_en


RECIPES: tuple[Recipe, ...] = (
    Recipe(
        "official_score",
        "Escore oficial e técnico por modelo (anuladas creditadas a todos)",
        "Official and technical score per model (annulled questions credited to everyone)",
        f"""WITH {_CANONICAL}, {_EDITION_TOTALS}, {_PER_EDITION}
SELECT model_key,
       sum(technical_score + annulled)::BIGINT AS official_score,
       sum(questions)::BIGINT AS official_total,
       sum(technical_score + annulled) / sum(questions) AS official_accuracy,
       sum(technical_score)::BIGINT AS technical_score,
       sum(active)::BIGINT AS technical_total
FROM per_edition GROUP BY model_key ORDER BY official_score DESC, model_key""",
    ),
    Recipe(
        "accuracy_interval",
        "Intervalo de 95% de Wilson, levado à escala oficial",
        "95% Wilson interval, carried to the official scale",
        f"""WITH {_CANONICAL}, {_EDITION_TOTALS}, {_PER_EDITION},
counts AS (
    SELECT model_key, sum(technical_score)::DOUBLE AS k, sum(active)::DOUBLE AS n, sum(questions)::DOUBLE AS total,
           1.959963984540054 AS z
    FROM per_edition GROUP BY model_key
), wilson AS (
    SELECT *, k / n AS p, 1 + z * z / n AS d FROM counts WHERE n > 0
)
SELECT model_key,
       ((total - n) + n * greatest(0, ((p + z * z / (2 * n)) - z * sqrt(p * (1 - p) / n + z * z / (4 * n * n))) / d))
           / total AS accuracy_ci_low,
       ((total - n) + n * least(1, ((p + z * z / (2 * n)) + z * sqrt(p * (1 - p) / n + z * z / (4 * n * n))) / d))
           / total AS accuracy_ci_high
FROM wilson ORDER BY model_key""",
    ),
    Recipe(
        "editions_passed",
        "Edições aprovadas (escore oficial de pelo menos metade das questões)",
        "Editions passed (an official score of at least half the questions)",
        f"""WITH {_CANONICAL}, {_EDITION_TOTALS}, {_PER_EDITION}
SELECT model_key,
       count(*) FILTER (WHERE technical_score + annulled >= ceil(questions / 2)) AS editions_passed,
       count(*) AS editions_run
FROM per_edition GROUP BY model_key ORDER BY model_key""",
    ),
    Recipe(
        "p50_latency",
        "Latência mediana (p50) e p95 das chamadas",
        "Median (p50) and p95 latency of the calls",
        f"""WITH {_CANONICAL}
SELECT model_key,
       quantile_cont(latency_ms, 0.5) FILTER (WHERE NOT skipped) AS p50_latency_ms,
       quantile_cont(latency_ms, 0.95) FILTER (WHERE NOT skipped) AS p95_latency_ms
FROM canonical GROUP BY model_key ORDER BY model_key""",
    ),
    Recipe(
        "strict_compliance",
        "Conformidade estrita: respostas que são só uma letra",
        "Strict compliance: replies that are just one letter",
        f"""WITH {_CANONICAL}
SELECT model_key,
       count(*) FILTER (WHERE strict_compliant) / count(*) FILTER (WHERE NOT skipped) AS strict_compliance
FROM canonical GROUP BY model_key ORDER BY model_key""",
    ),
    Recipe(
        "effective_cost",
        "Custo: o informado quando toda chamada o traz, senão tokens × preços (estimado)",
        "Cost: the reported one when every call carries it, else tokens × prices (estimated)",
        f"""WITH {_CANONICAL},
cells AS (
    SELECT c.model_key, c.edition, c.run_id, sum(c.cost_usd) AS cost_usd,
           count(*) FILTER (WHERE NOT c.skipped) AS calls,
           count(c.cost_usd) FILTER (WHERE NOT c.skipped) AS cost_calls,
           sum(c.prompt_tokens) AS prompt_tokens, sum(c.completion_tokens) AS completion_tokens
    FROM canonical AS c GROUP BY ALL
), price AS (
    SELECT model, prompt_price_per_token, completion_price_per_token FROM model_pricing
    QUALIFY row_number() OVER (PARTITION BY model ORDER BY fetched_at DESC) = 1
), priced AS (
    SELECT cells.*,
           cells.prompt_tokens * coalesce(r.prompt_price_per_token, p.prompt_price_per_token)
             + cells.completion_tokens * coalesce(r.completion_price_per_token, p.completion_price_per_token)
             AS estimated
    FROM cells
    LEFT JOIN published_run_summaries AS r ON r.run_id = cells.run_id
    LEFT JOIN models AS m ON m.model_key = cells.model_key
    LEFT JOIN price AS p ON p.model = coalesce(m.model, cells.model_key)
)
SELECT model_key,
       CASE WHEN sum(cost_calls) = sum(calls) AND count(cost_usd) > 0 THEN sum(cost_usd)
            WHEN count(estimated) = count(*) THEN sum(estimated) END::DOUBLE AS effective_cost_usd,
       CASE WHEN sum(cost_calls) = sum(calls) AND count(cost_usd) > 0 THEN 'reported'
            WHEN count(estimated) = count(*) THEN 'estimated' END AS cost_source
FROM priced GROUP BY model_key ORDER BY model_key""",
    ),
    Recipe(
        "share_correct",
        "Parcela dos modelos que acertaram cada questão (sem os baselines offline)",
        "Share of models that got each question right (offline baselines left out)",
        f"""WITH {_CANONICAL}
SELECT qid, count(*) FILTER (WHERE is_correct_technical) AS models_right,
       count(*) FILTER (WHERE status = 'active' AND NOT skipped) AS models_asked,
       count(*) FILTER (WHERE is_correct_technical)
         / nullif(count(*) FILTER (WHERE status = 'active' AND NOT skipped), 0) AS share_correct
FROM canonical
WHERE model_key NOT IN (SELECT model_key FROM models WHERE kind = 'baseline')
GROUP BY qid ORDER BY qid""",
    ),
)
