"""Column contracts of every warehouse table: name, type and a description a person reads in the UI.

The writer casts each partition to its contract, so all partitions of a table share one schema and the
DuckDB views over them stay stable; the same descriptions become Dagster table-schema metadata.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from oabench_pipeline.core.numbers import without_float_noise
from oabench_pipeline.core.text_safety import spreadsheet_safe_expr


@dataclass(frozen=True)
class Column:
    name: str
    dtype: pl.DataType | type[pl.DataType]
    description: str


def _columns(*specs: tuple[str, pl.DataType | type[pl.DataType], str]) -> tuple[Column, ...]:
    return tuple(Column(name, dtype, description) for name, dtype, description in specs)


STATUS_SOURCE_DESCRIPTION = (
    "Where the status comes from: 'key' (the answer key: a letter, or '*' for annulled) or "
    "'registry: <source>' (an annulment the pinned key does not show, e.g. after a preliminary key), or "
    "'registry: unresolved' (a question whose later key is unknown and disputed: status_note says why)"
)

TABLES: dict[str, tuple[Column, ...]] = {
    "editions": _columns(
        ("edition", pl.Int32, "Edition number of the Exame de Ordem Unificado (partition key)"),
        ("exam_name", pl.String, "Official name, e.g. 43º EXAME DE ORDEM UNIFICADO"),
        ("exam_date", pl.Date, "Date of the 1st-phase (objective) exam"),
        (
            "exam_page_url",
            pl.String,
            "The edition's page on the OAB portal; NULL when not known (archived editions)",
        ),
        ("booklet_url", pl.String, "Official URL of the question booklet (Caderno de Prova - Tipo 1)"),
        ("booklet_sha256", pl.String, "Pinned SHA-256 of the booklet PDF"),
        (
            "answer_key_url",
            pl.String,
            "URL of the answer key: definitive (Gabaritos Definitivos) or preliminary",
        ),
        ("answer_key_sha256", pl.String, "Pinned SHA-256 of the answer-key PDF"),
        ("area_scheme", pl.String, "Name of the question-number → legal-area table this edition uses"),
        ("pinned_by", pl.String, "'registry' (reviewed by hand) or 'first-download' (trust on first use)"),
        (
            "exam_label",
            pl.String,
            "The name the 1st-3rd exams went by instead of a number (2010.1-2010.3); else NULL",
        ),
        ("question_count", pl.Int32, "Questions in the exam: 100 in the 1st-3rd editions, 80 after"),
        (
            "key_status",
            pl.String,
            "What the pinned answer key is: 'definitive' or 'preliminary' (GABARITOS PRELIMINARES: shows no "
            "annulment; the registry's `annulled` adds those known)",
        ),
        (
            "annulled",
            pl.List(pl.Int32),
            "Questions annulled that the pinned key does not show (from the registry)",
        ),
        ("annulled_source", pl.String, "Who says the `annulled` questions were annulled; NULL when none"),
        (
            "booklet_official_url",
            pl.String,
            "The examiners' own download address of the booklet's bytes, where the file is pinned from an "
            "archive (provenance); NULL when not known or the same as booklet_url",
        ),
        (
            "answer_key_official_url",
            pl.String,
            "The examiners' own download address of the answer key's bytes (provenance); NULL when not known",
        ),
        (
            "unresolved",
            pl.List(pl.Int32),
            "Questions whose later key is unknown and disputed (from the registry): left out of both scores",
        ),
    ),
    "source_files": _columns(
        ("edition", pl.Int32, "Edition number"),
        ("kind", pl.String, "'booklet' or 'answer_key'"),
        ("url", pl.String, "Official URL of the file"),
        ("fetched_from", pl.String, "Where the bytes came from (the official URL or a mirror)"),
        ("sha256", pl.String, "SHA-256 of the stored bytes (equal to the pin)"),
        ("bytes", pl.Int64, "Size in bytes"),
        ("stored_at", pl.String, "Path of the file in the content-addressed raw store"),
        (
            "official_url",
            pl.String,
            "The examiners' own download address of the same bytes, when the file is pinned from an archive "
            "(the registry's official_url); NULL when not known",
        ),
    ),
    "questions": _columns(
        ("qid", pl.String, "Question id as in published OABench runs: oab-{edition}-1f-q{number}"),
        ("edition", pl.Int32, "Edition number"),
        ("number", pl.Int32, "Question number in booklet TIPO 1 (1-80; 1-100 in the 1st-3rd editions)"),
        ("area", pl.String, "Legal area, from the edition's area table"),
        ("stem", pl.String, "Question text, in reading order, without running headers and footers"),
        ("choice_a", pl.String, "Text of choice (A)"),
        ("choice_b", pl.String, "Text of choice (B)"),
        ("choice_c", pl.String, "Text of choice (C)"),
        ("choice_d", pl.String, "Text of choice (D)"),
        (
            "status",
            pl.String,
            "'active', 'annulled' when the key or the registry annuls it, or 'unresolved' when its later key "
            "is unknown and disputed (status_source; asked of no model, left out of both scores)",
        ),
        ("requires_image", pl.Boolean, "A picture lies inside the question's own region"),
        ("pages", pl.List(pl.Int32), "1-based booklet pages the question spans"),
        ("source_sha256", pl.String, "SHA-256 of the booklet PDF the text was read from"),
        ("exam_date", pl.Date, "Date of the exam (from the editions registry)"),
        ("key_status", pl.String, "'definitive' or 'preliminary': the answer key the status comes from"),
        ("status_source", pl.String, STATUS_SOURCE_DESCRIPTION),
    ),
    "answer_keys": _columns(
        ("qid", pl.String, "Question id"),
        ("edition", pl.Int32, "Edition number"),
        ("number", pl.Int32, "Question number in booklet TIPO 1"),
        ("correct", pl.String, "Correct letter A-D; NULL when annulled or unresolved"),
        (
            "status",
            pl.String,
            "'active', 'annulled' ('*' in the key, or annulled by the registry) or 'unresolved' (the later "
            "key is unknown and disputed: left out of both scores)",
        ),
        ("source_sha256", pl.String, "SHA-256 of the answer-key PDF"),
        ("exam_date", pl.Date, "Date of the exam (from the editions registry)"),
        ("key_status", pl.String, "'definitive' or 'preliminary': what the answer-key PDF is"),
        ("status_source", pl.String, STATUS_SOURCE_DESCRIPTION),
        (
            "key_document",
            pl.String,
            "'preliminary' or 'definitive': the document the answer comes from (an annulment the registry "
            "adds after a preliminary key: 'definitive', the later key as transcribed)",
        ),
        (
            "changed_after_preliminary",
            pl.Boolean,
            "TRUE: the answer differs from the preliminary key's (a notice in the key file, a later "
            "annulment); FALSE: the preliminary key's answer, no later change known; NULL: cannot be told "
            "(a definitive key, whose preliminary is not pinned; an unresolved question)",
        ),
        (
            "preliminary_correct",
            pl.String,
            "The preliminary key's letter, when the pinned key is preliminary; NULL otherwise or when it "
            "shows the question annulled",
        ),
        (
            "status_note",
            pl.String,
            "Why the answer or status is not the key grid's plain letter: a notice's change, a later "
            "annulment, or why the question is unresolved; NULL otherwise",
        ),
    ),
    "models": _columns(
        ("model_key", pl.String, "Configuration key: model id + :reasoning-{effort} + :web + :deliberativo"),
        ("model", pl.String, "Model id sent to the endpoint"),
        ("label", pl.String, "Display name"),
        ("provider", pl.String, "Who makes the model"),
        ("protocol", pl.String, "'direto' (letter only) or 'deliberativo' (reason, then FINAL_ANSWER)"),
        ("reasoning_effort", pl.String, "OpenRouter reasoning effort (low/medium/high) or NULL"),
        ("web_search", pl.Boolean, "OpenRouter web plugin enabled"),
        ("base_url", pl.String, "OpenAI-compatible endpoint (NULL for offline baselines)"),
        ("kind", pl.String, "'api', 'baseline' or 'imported' (known only from a published run)"),
        ("concurrency", pl.Int32, "Requests in flight"),
        ("max_cost_usd", pl.Float64, "Budget per run of a cell, if any"),
        ("knowledge_cutoff", pl.Date, "Training-data cutoff, for the contamination analysis"),
        ("in_registry", pl.Boolean, "Still listed in the models registry (removed keys keep their history)"),
    ),
    "inferences": _columns(
        ("model_key", pl.String, "Model configuration key (partition dimension `model`)"),
        ("model", pl.String, "Model id sent to the endpoint"),
        ("protocol", pl.String, "'direto' or 'deliberativo'"),
        ("reasoning_effort", pl.String, "Reasoning effort sent, or NULL"),
        ("web_search", pl.Boolean, "Web plugin enabled"),
        ("qid", pl.String, "Question id"),
        ("edition", pl.Int32, "Edition number (partition dimension `edition`)"),
        ("number", pl.Int32, "Question number"),
        ("raw_response", pl.String, "The model's reply, verbatim; NULL when skipped or failed"),
        ("reasoning", pl.String, "Reasoning text returned by the endpoint, if any"),
        ("answer_strict", pl.String, "Letter when the whole reply is just a letter (strict parse)"),
        ("answer_lenient", pl.String, "Letter extracted by the lenient rules (the scored answer)"),
        ("parser_version", pl.String, "Answer-parser version used for the two answers"),
        ("latency_ms", pl.Int64, "Wall time of the successful attempt"),
        ("prompt_tokens", pl.Int64, "Prompt tokens reported by the endpoint"),
        ("completion_tokens", pl.Int64, "Completion tokens reported (reasoning included)"),
        ("reasoning_tokens", pl.Int64, "Reasoning tokens reported"),
        (
            "cost_usd",
            pl.Float64,
            "Cost reported by the endpoint, all attempts: usage.cost, else a gateway's cost header "
            "(x-litellm-response-cost); NULL when unreported, negative or not finite",
        ),
        ("error", pl.String, "Why there is no answer (after retries); NULL when answered"),
        ("skipped", pl.Boolean, "Annulled question: no call made, credited to everyone"),
        ("attempts", pl.Int32, "HTTP attempts made for this answer"),
        ("request_hash", pl.String, "SHA-256 of the exact request body (model, prompts, parameters)"),
        ("source", pl.String, "'live', 'baseline' or 'imported'"),
        ("created_at", pl.Datetime("us", "UTC"), "When the answer arrived"),
        (
            "run_id",
            pl.String,
            "Logical run (see `runs`): live:<key>:r<replicate>, baseline:<key>, or the published folder name; "
            "stable across resumes",
        ),
        (
            "dagster_run_id",
            pl.String,
            "Dagster run that wrote the row (NULL for rows written before it existed)",
        ),
        ("response_id", pl.String, "The reply's `id` (e.g. OpenRouter's generation id); NULL when absent"),
        ("response_model", pl.String, "The reply's `model`: the model that actually answered"),
        ("finish_reason", pl.String, "choices[0].finish_reason of the reply ('stop', 'length', ...)"),
        ("response_provider", pl.String, "The reply's `provider` (OpenRouter: the upstream that served it)"),
        ("system_fingerprint", pl.String, "The reply's `system_fingerprint` (backend configuration)"),
        ("batch_id", pl.String, "The provider's batch that answered (`oabench run --batch`); NULL for chat"),
    ),
    "published_run_summaries": _columns(
        ("run_id", pl.String, "Published OABench run folder name (partition key)"),
        ("model_key", pl.String, "Model configuration key of the run"),
        ("model", pl.String, "Model id"),
        ("has_summary", pl.Boolean, "The folder has a summary.json; without one the run was aborted"),
        ("editions", pl.List(pl.Int32), "Editions the summary lists: the cells the run completed"),
        ("completed_at", pl.Datetime("us", "UTC"), "The summary's completedAt"),
        ("actual_cost_usd", pl.Float64, "The summary's reported cost (actualCostUsd), if any"),
        ("estimated_cost_usd", pl.Float64, "The summary's estimated cost (tokens x its price snapshot)"),
        ("prompt_price_per_token", pl.Float64, "The summary's price snapshot: USD per prompt token"),
        ("completion_price_per_token", pl.Float64, "The summary's price snapshot: USD per completion token"),
        ("pricing_fetched_at", pl.Datetime("us", "UTC"), "When the summary's price snapshot was taken"),
    ),
    "model_pricing": _columns(
        ("fetched_at", pl.Datetime("us", "UTC"), "When this snapshot of the endpoint's price list was taken"),
        ("base_url", pl.String, "Endpoint whose /models list was read"),
        ("model", pl.String, "Model id"),
        ("prompt_price_per_token", pl.Float64, "USD per prompt token"),
        ("completion_price_per_token", pl.Float64, "USD per completion token"),
    ),
    "model_catalogue": _columns(
        ("fetched_at", pl.Datetime("us", "UTC"), "When this snapshot of the catalogue was fetched"),
        ("catalogue_url", pl.String, "The listing read (OABENCH_CATALOGUE_URL)"),
        ("model", pl.String, "Model id as the catalogue lists it (OpenRouter: `provider/name`)"),
        ("name", pl.String, "Display name"),
        ("created", pl.Datetime("us", "UTC"), "When the catalogue added the model (`created`, Unix time)"),
        ("context_length", pl.Int64, "Context window in tokens"),
        ("modality", pl.String, "architecture.modality, e.g. 'text+image->text'"),
        ("input_modalities", pl.List(pl.String), "architecture.input_modalities"),
        ("output_modalities", pl.List(pl.String), "architecture.output_modalities"),
        (
            "supported_parameters",
            pl.List(pl.String),
            "Parameters the model accepts (reasoning, temperature...)",
        ),
        ("knowledge_cutoff", pl.Date, "Training cutoff, when listed (a month alone: its last day)"),
        (
            "expiration_date",
            pl.Date,
            "When the catalogue stops serving the model, when listed: retired from then",
        ),
        ("prompt_usd_per_mtok", pl.Float64, "USD per million prompt tokens (NULL: not listed, or variable)"),
        ("completion_usd_per_mtok", pl.Float64, "USD per million completion tokens"),
        ("internal_reasoning_usd_per_mtok", pl.Float64, "USD per million internal reasoning tokens"),
        ("input_cache_read_usd_per_mtok", pl.Float64, "USD per million cached prompt tokens read"),
        ("input_cache_write_usd_per_mtok", pl.Float64, "USD per million prompt tokens written to the cache"),
        ("request_usd", pl.Float64, "USD per request"),
        ("image_usd", pl.Float64, "USD per input image"),
        ("web_search_usd", pl.Float64, "USD per web search"),
        (
            "pricing_json",
            pl.String,
            "The listing's whole `pricing` object (USD per token or unit, as listed)",
        ),
    ),
    "catalogue_decisions": _columns(
        (
            "decided_at",
            pl.Datetime("us", "UTC"),
            "When the tick decided (sensor tick or `oabench catalogue sync`)",
        ),
        ("snapshot_fetched_at", pl.Datetime("us", "UTC"), "The model_catalogue snapshot decided on"),
        ("model", pl.String, "Catalogue model id"),
        ("outcome", pl.String, "'registered' (entries written, cells requested) or 'skipped'"),
        (
            "reason",
            pl.String,
            "Why: 'fits' (registered), or the skip's kind: 'policy', 'price', 'budget', 'modality', "
            "'retired', 'registry' (a hand-written entry exists), 'suite'",
        ),
        ("detail", pl.String, "The decision in one line, with the figures it rests on"),
        ("model_keys", pl.List(pl.String), "Registry keys written (one per protocol); empty when skipped"),
        ("suite", pl.String, "The policy's suite the cost is estimated on (and the cells run on)"),
        ("editions", pl.List(pl.Int32), "The suite's editions whose cells were requested (ingested ones)"),
        ("estimated_cost_usd", pl.Float64, "The model's estimated cost on the suite (every protocol)"),
        ("budget_left_usd", pl.Float64, "What the month's budget had left before this decision"),
        ("policy_sha256", pl.String, "SHA-256 of the policy fields a decision rests on"),
        ("listing_sha256", pl.String, "SHA-256 of the model's listing fields a decision rests on"),
    ),
}


TABLES["scores"] = _columns(
    ("model_key", pl.String, "Model configuration key (partition dimension `model`)"),
    ("qid", pl.String, "Question id"),
    ("edition", pl.Int32, "Edition number (partition dimension `edition`)"),
    ("number", pl.Int32, "Question number in booklet TIPO 1"),
    ("area", pl.String, "Legal area of the question"),
    (
        "status",
        pl.String,
        "'active', 'annulled' or 'unresolved' (its later key unknown and disputed), from `answer_keys`",
    ),
    ("correct", pl.String, "Correct letter per the answer key; NULL when annulled or unresolved"),
    ("answer", pl.String, "The model's scored letter (lenient parse); NULL when none was extracted"),
    ("answer_strict", pl.String, "Letter when the whole reply is just a letter (strict parse)"),
    (
        "is_correct_official",
        pl.Boolean,
        "Official credit: right answer, or any answer to an annulled question; NULL when unresolved",
    ),
    (
        "is_correct_technical",
        pl.Boolean,
        "Right answer on an active question; NULL when annulled or unresolved",
    ),
    ("is_valid", pl.Boolean, "A letter was extracted and the call neither failed nor was skipped"),
    ("has_error", pl.Boolean, "The call failed after its retries"),
    ("skipped", pl.Boolean, "Annulled or unresolved question: no call made"),
    ("strict_compliant", pl.Boolean, "The reply was exactly one letter (protocol compliance)"),
    ("latency_ms", pl.Int64, "Wall time of the successful attempt"),
    ("prompt_tokens", pl.Int64, "Prompt tokens reported by the endpoint"),
    ("completion_tokens", pl.Int64, "Completion tokens reported (reasoning included)"),
    ("reasoning_tokens", pl.Int64, "Reasoning tokens reported"),
    ("cost_usd", pl.Float64, "Cost reported by the endpoint, all attempts"),
    ("source", pl.String, "'live', 'baseline' or 'imported'"),
    ("run_id", pl.String, "Logical run the answer belongs to (see `runs`)"),
)

# The leaderboard tables: described for the UI but not cast on write (`conform` leaves them as built),
# because their builders own the types (unsigned counts, nested answer distributions, time zones).
# The 2nd phase (prova prático-profissional): OAB-Bench's items and the examiners' answer standards, models'
# answers, judges' judgments, and what is computed from them (docs/phase2.md). A phase-2 item is one area-exam's
# procedural piece (one turn, 5.00 points) or one of its 4 discursive questions (two turns: sub-items A and B).
PHASE2_SOURCE_COLUMNS = (
    ("source_url", pl.String, "Pinned URL the row's file was downloaded from (OAB-Bench at one commit)"),
    ("source_sha256", pl.String, "SHA-256 of that file, checked against its pin"),
)
TABLES.update(
    {
        "phase2_items": _columns(
            ("item_id", pl.String, "OAB-Bench's question_id, e.g. 39_direito_administrativo_questao_1"),
            ("edition", pl.Int32, "Edition number of the Exame de Ordem Unificado (partition key)"),
            ("area", pl.String, "Area of law of the area-exam, e.g. direito_administrativo"),
            ("kind", pl.String, "'piece' (peça prático-profissional) or 'question' (questão discursiva)"),
            ("number", pl.Int32, "The question's number in its area-exam (1-4); NULL for the piece"),
            ("statement", pl.String, "The case as the exam states it"),
            (
                "system",
                pl.String,
                "The instruction a candidate (here: a model) is given, OAB-Bench's `system`",
            ),
            (
                "turn_prompts",
                pl.List(pl.String),
                "Each sub-item's prompt: one for the piece, A and B for a question",
            ),
            (
                "turn_points",
                pl.List(pl.Float64),
                "Each sub-item's points (the piece: [5.0]; a question: A, B)",
            ),
            ("max_points", pl.Float64, "The item's points: 5.00 for the piece, 1.25 for a question"),
            *PHASE2_SOURCE_COLUMNS,
        ),
        "phase2_standards": _columns(
            ("item_id", pl.String, "Item (phase2_items.item_id)"),
            ("edition", pl.Int32, "Edition number (partition key)"),
            ("area", pl.String, "Area of law"),
            ("turn", pl.Int32, "Sub-item: 1 (the piece, or sub-item A), 2 (sub-item B)"),
            (
                "standard",
                pl.String,
                "The examiners' answer standard (padrão de resposta) of the sub-item, as published",
            ),
            ("points", pl.Float64, "The sub-item's points"),
            (
                "criteria",
                pl.List(
                    pl.Struct({"text": pl.String, "max_points": pl.Float64, "allowed": pl.List(pl.Float64)})
                ),
                "The distribution table's criteria: text, maximum, allowed values (0,00/0,10/0,20 → [0, 0.1, 0.2])",
            ),
            *PHASE2_SOURCE_COLUMNS,
        ),
        "phase2_answers": _columns(
            ("model_key", pl.String, "Model configuration key (partition dimension `model`)"),
            ("edition", pl.Int32, "Edition number (partition dimension `edition`)"),
            ("item_id", pl.String, "Item (phase2_items.item_id)"),
            ("area", pl.String, "Area of law"),
            ("turn", pl.Int32, "Sub-item: 1 (the piece, or sub-item A), 2 (sub-item B, same conversation)"),
            ("run_id", pl.String, "Logical run: `live:<key>:r<k>`, or `oab-bench:<commit>` for an import"),
            ("answer", pl.String, "The model's raw reply to the sub-item; NULL when it failed (see error)"),
            ("reasoning", pl.String, "Reasoning text the endpoint returned beside the reply, if any"),
            (
                "finish_reason",
                pl.String,
                "The endpoint's finish_reason ('stop', 'length', ...); NULL if unknown",
            ),
            ("truncated", pl.Boolean, "The reply hit the completion ceiling (finish_reason 'length')"),
            (
                "max_completion_tokens",
                pl.Int64,
                "The completion ceiling the request was sent with; NULL: none",
            ),
            ("prompt_tokens", pl.Int64, "Prompt tokens reported by the endpoint"),
            ("completion_tokens", pl.Int64, "Completion tokens reported by the endpoint"),
            ("reasoning_tokens", pl.Int64, "Reasoning tokens reported by the endpoint, if any"),
            ("cost_usd", pl.Float64, "Cost of the reply in USD as reported; NULL when unknown"),
            ("latency_ms", pl.Float64, "Time from request to reply"),
            ("request_hash", pl.String, "SHA-256 of the exact request body (the response log's key)"),
            ("error", pl.String, "Why no reply was kept (after retries); NULL on success"),
            ("source", pl.String, "'live', or where an imported answer comes from (file, commit)"),
            ("answered_at", pl.Datetime("us", "UTC"), "When the reply arrived (NULL for an import)"),
            ("dagster_run_id", pl.String, "Dagster run that wrote the row"),
        ),
        "phase2_judgments": _columns(
            ("judge_key", pl.String, "The judge's model key (partition dimension `judge`)"),
            ("model_key", pl.String, "The judged model's key (partition dimension `model`)"),
            ("edition", pl.Int32, "Edition number"),
            ("item_id", pl.String, "Item (phase2_items.item_id)"),
            ("area", pl.String, "Area of law"),
            ("turn", pl.Int32, "Sub-item judged: 1 (the piece, or sub-item A), 2 (sub-item B)"),
            (
                "score",
                pl.Float64,
                "Points the judge gave; NULL when the judgment is invalid (never 0 for it)",
            ),
            ("max_points", pl.Float64, "The sub-item's points"),
            ("valid", pl.Boolean, "A score was found and is within 0..max_points"),
            (
                "invalid_reason",
                pl.String,
                "Why the judgment is invalid (no [[score]], above the points, ...)",
            ),
            ("judgment", pl.String, "The judge's raw text (its correction)"),
            (
                "prompt_name",
                pl.String,
                "The judge prompt: 'single-oab-v1', 'single-oab-v1-multi-turn', or a structured one",
            ),
            ("structured", pl.Boolean, "Points per criterion returned as JSON (`--structured`)"),
            ("criteria_points", pl.List(pl.Float64), "Structured judgments: points given per criterion"),
            ("answer_run_id", pl.String, "The judged answer's run (phase2_answers.run_id)"),
            (
                "max_completion_tokens",
                pl.Int64,
                "The completion ceiling the judge was asked with; NULL: none (or unknown, for an import)",
            ),
            (
                "finish_reason",
                pl.String,
                "The judge's finish_reason ('stop', 'length', ...); NULL if unknown",
            ),
            ("prompt_tokens", pl.Int64, "Prompt tokens of the judgment"),
            ("completion_tokens", pl.Int64, "Completion tokens of the judgment"),
            ("cost_usd", pl.Float64, "Cost of the judgment in USD as reported; NULL when unknown"),
            ("request_hash", pl.String, "SHA-256 of the judge request's exact body"),
            ("error", pl.String, "Why no judgment was kept (after retries); NULL on success"),
            ("source", pl.String, "'live', or where an imported judgment comes from (file, commit)"),
            ("judged_at", pl.Datetime("us", "UTC"), "When the judgment arrived (NULL for an import)"),
            ("dagster_run_id", pl.String, "Dagster run that wrote the row"),
        ),
        "phase2_scores": _columns(
            ("judge_key", pl.String, "The judge's model key"),
            ("model_key", pl.String, "The judged model's key"),
            ("edition", pl.Int32, "Edition number"),
            ("area", pl.String, "Area of law: the area-exam is edition × area"),
            ("total", pl.Float64, "Points of the area-exam out of 10 (valid judgments only)"),
            ("piece_points", pl.Float64, "Points of the procedural piece, out of 5"),
            ("questions_points", pl.Float64, "Points of the 4 questions, out of 5"),
            ("complete", pl.Boolean, "Every sub-item has a valid judgment"),
            (
                "passed",
                pl.Boolean,
                "total rounded to hundredths >= 6.00; NULL when incomplete (never failed for a missing score)",
            ),
            ("missing", pl.Int32, "Sub-items with no answer or no judgment"),
            ("invalid", pl.Int32, "Sub-items whose judgment is invalid"),
        ),
    }
)
# Added by the phase-2 ingest and import (docs/phase2.md): the pinned files, the judge prompts, and columns
# that say what the source itself records.
TABLES["phase2_standards"] += _columns(
    (
        "annulled",
        pl.Boolean,
        "The standard says the sub-item was annulled ('(Anulada)'); judges still grade it, as OAB-Bench did",
    ),
)
TABLES["phase2_judgments"] += _columns(
    (
        "recorded_score",
        pl.Float64,
        "An imported judgment: the score its file records beside the text (NULL for a live judgment)",
    ),
    (
        "score_source",
        pl.String,
        "'judgment' (the first [[n]] of the text), or 'recorded' (no [[n]] in the text: the imported file's "
        "own score is kept)",
    ),
)
# The provider's batch that answered (`--batch`, docs/batch.md): provenance, as in `inferences`.
for _phase2_table in ("phase2_answers", "phase2_judgments"):
    TABLES[_phase2_table] += _columns(
        ("batch_id", pl.String, "The provider's batch that answered (`--batch`); NULL for chat or an import"),
    )
TABLES.update(
    {
        "phase2_source_files": _columns(
            ("kind", pl.String, "'questions', 'standards' or 'judge_prompts' (registry/phase2.toml)"),
            ("path", pl.String, "The file's path in OAB-Bench's repository"),
            ("url", pl.String, "Pinned raw URL at OAB-Bench's commit"),
            ("fetched_from", pl.String, "Where the bytes came from (the URL or a mirror)"),
            ("sha256", pl.String, "SHA-256 of the stored bytes (equal to the pin)"),
            ("bytes", pl.Int64, "Size in bytes"),
            ("stored_at", pl.String, "Path of the file in the content-addressed raw store"),
            ("commit", pl.String, "OAB-Bench's commit the URL is pinned to"),
        ),
        "phase2_leaderboard": _columns(
            ("judge_key", pl.String, "The judge whose judgments the row counts"),
            ("rank", pl.Int64, "Rank by mean_score among the judge's ranked models (NULL: not ranked)"),
            (
                "rank_low",
                pl.Int64,
                "Best rank the tests allow: 1 + ranked models significantly better (paired t tests over the "
                "shared area-exams, Holm-corrected, 5%)",
            ),
            (
                "rank_high",
                pl.Int64,
                "Worst rank the tests allow: ranked models − ranked models significantly worse",
            ),
            ("model_key", pl.String, "The judged model's key"),
            (
                "mean_score",
                pl.Float64,
                "Mean area-exam total (of 10) over its complete area-exams, in hundredths",
            ),
            (
                "mean_ci_low",
                pl.Float64,
                "Lower end of the mean's 95% Student t interval over the complete area-exams",
            ),
            ("mean_ci_high", pl.Float64, "Upper end of the mean's 95% Student t interval"),
            ("exams_passed", pl.Int64, "Complete area-exams passed (total rounded to hundredths >= 6.00)"),
            ("exams_total", pl.Int64, "Area-exams of the editions the model answered"),
            (
                "exams_complete",
                pl.Int64,
                "Area-exams whose every sub-item has an answer and a valid judgment",
            ),
            (
                "exams_incomplete",
                pl.Int64,
                "Area-exams with a missing or invalid judgment: neither passed nor failed",
            ),
            ("invalid", pl.Int64, "Sub-items whose judgment is invalid (no [[score]], above the points)"),
            ("missing", pl.Int64, "Sub-items with no answer or no judgment"),
            (
                "ranked",
                pl.Boolean,
                "Every area-exam of the ingested items is complete, from complete answer runs: only these rank",
            ),
            (
                "answer_cost_usd",
                pl.Float64,
                "Cost of the counted answers; NULL when any is unknown (an import)",
            ),
            (
                "judging_cost_usd",
                pl.Float64,
                "Cost of the counted judgments; NULL when any is unknown (an import)",
            ),
            (
                "answer_run_ids",
                pl.List(pl.String),
                "The answer runs counted, one per edition (docs/phase2.md)",
            ),
        ),
        "phase2_leaderboard_by_area": _columns(
            ("judge_key", pl.String, "The judge"),
            ("model_key", pl.String, "The judged model's key"),
            ("area", pl.String, "Area of law"),
            ("exams_total", pl.Int64, "Area-exams of this area (one per edition answered)"),
            ("exams_complete", pl.Int64, "Those with every sub-item validly judged"),
            ("mean_score", pl.Float64, "Mean total (of 10) over the complete ones, in hundredths"),
            ("exams_passed", pl.Int64, "Complete area-exams passed (>= 6.00)"),
            ("editions", pl.List(pl.Int32), "The editions of those area-exams"),
        ),
        "phase2_judge_prompts": _columns(
            (
                "name",
                pl.String,
                "Prompt name: 'single-oab-v1' (piece, sub-item A), 'single-oab-v1-multi-turn' (B)",
            ),
            ("type", pl.String, "'single' (one answer graded) or 'pairwise' (FastChat's, unused here)"),
            ("system_prompt", pl.String, "The judge's system message"),
            (
                "prompt_template",
                pl.String,
                "The user message, with {placeholders} for question, standard, answer",
            ),
            ("output_format", pl.String, "How the judge states its score, e.g. [[rating]]"),
            ("description", pl.String, "The file's description of the prompt"),
            ("category", pl.String, "The file's category: 'oab', 'general', 'math'"),
            *PHASE2_SOURCE_COLUMNS,
        ),
    }
)

# Judges compared, and the candidates' side of the exam (docs/phase2.md).
TABLES.update(
    {
        "phase2_judge_agreement": _columns(
            ("judge_a", pl.String, "One judge's model key (the first in sort order)"),
            ("judge_b", pl.String, "The other judge's model key"),
            ("area", pl.String, "Area of law, or 'all' for every area together"),
            ("answers", pl.Int64, "Sub-items (model × item × turn) both judges scored validly"),
            ("mae", pl.Float64, "Mean absolute difference of the two judges' points per sub-item"),
            ("mean_difference", pl.Float64, "Mean of judge_a's points minus judge_b's (a judge's leniency)"),
            (
                "pearson",
                pl.Float64,
                "Pearson correlation of the two judges' share of each sub-item's points; NULL if one is constant",
            ),
            ("spearman", pl.Float64, "Spearman rank correlation of the two judges' share of the points"),
            (
                "icc",
                pl.Float64,
                "ICC(2,1) of the share of the points: two-way random effects, absolute agreement, one rater "
                "(pingouin's ICC(A,1))",
            ),
            ("icc_ci_low", pl.Float64, "Lower end of the ICC's 95% interval (McGraw & Wong)"),
            ("icc_ci_high", pl.Float64, "Upper end of the ICC's 95% interval"),
            ("exams_compared", pl.Int64, "Area-exams (model × edition × area) both judges scored completely"),
            (
                "exams_pass_disagree",
                pl.Int64,
                "Of those, exams one judge passes (total rounded to hundredths >= 6.00) and the other fails",
            ),
            ("pass_disagreement_rate", pl.Float64, "exams_pass_disagree / exams_compared; NULL when none"),
        ),
        "candidate_pass_rates": _columns(
            ("edition", pl.Int32, "Edition number of the Exame de Ordem Unificado"),
            ("pass_rate", pl.Float64, "Share of candidates who passed the 1st phase, as the source gives it"),
            ("approved", pl.Int64, "Candidates approved in the 1st phase, when the source gives the count"),
            ("denominator", pl.Int64, "The count the rate is taken over, when the source gives it"),
            (
                "denominator_kind",
                pl.String,
                "What the rate is taken over: 'present', 'inscribed', ... (registry/pass_rates.toml)",
            ),
            ("stage", pl.String, "'final' (after appeals and annulments) or 'preliminary'"),
            ("note", pl.String, "What else the source says (annulments, what is included)"),
            ("source_url", pl.String, "Where the figure is published"),
            ("source_title", pl.String, "The source's title"),
            ("source_date", pl.Date, "The source's date"),
        ),
    }
)

DESCRIBED_TABLES: dict[str, tuple[Column, ...]] = {
    "leaderboard": _columns(
        ("rank", pl.Int64, "Rank by official score among complete keys (NULL: incomplete key)"),
        (
            "tie_group",
            pl.String,
            "Compact letter display (kept for one release): ranked keys sharing a letter do not differ "
            "significantly (exact McNemar, Holm); see rank_low/rank_high",
        ),
        ("model_key", pl.String, "Model configuration key"),
        ("label", pl.String, "Display name"),
        ("provider", pl.String, "Who makes the model"),
        (
            "official_score",
            pl.Int64,
            "Correct answers plus every annulled question, over the suite's editions",
        ),
        (
            "official_total",
            pl.Int64,
            "Questions in the suite's editions the key ran (80 each; 100 in the 1st-3rd)",
        ),
        ("official_accuracy", pl.Float64, "official_score / official_total"),
        (
            "accuracy_ci_low",
            pl.Float64,
            "Lower end of the 95% Wilson interval on the official scale (annulled questions credited)",
        ),
        (
            "accuracy_ci_high",
            pl.Float64,
            "Upper end of the 95% Wilson interval on the official scale (annulled questions credited)",
        ),
        ("technical_score", pl.Int64, "Correct answers on active questions"),
        ("technical_total", pl.Int64, "Active questions"),
        ("technical_accuracy", pl.Float64, "technical_score / technical_total"),
        ("technical_ci_low", pl.Float64, "Lower end of the 95% Wilson score interval of technical accuracy"),
        ("technical_ci_high", pl.Float64, "Upper end of the 95% Wilson score interval of technical accuracy"),
        (
            "rank_low",
            pl.Int64,
            "Best rank the tests allow: 1 + ranked keys significantly better (McNemar, Holm)",
        ),
        ("rank_high", pl.Int64, "Worst rank the tests allow: ranked keys − ranked keys significantly worse"),
        (
            "ability",
            pl.Float64,
            "Rasch ability: log-odds of a right answer on a question of average difficulty, on one scale "
            "for keys that ran different editions (see item_abilities)",
        ),
        ("ability_ci_low", pl.Float64, "Lower end of the ability's 95% Wald interval"),
        ("ability_ci_high", pl.Float64, "Upper end of the ability's 95% Wald interval"),
        (
            "ability_rank",
            pl.Int64,
            "Dense rank by ability among keys whose every edition run (of the suite) is complete, whichever "
            "editions they ran (NULL: an incomplete run); `oabench leaderboard --rank-by ability`",
        ),
        (
            "editions_passed",
            pl.UInt32,
            "Editions of the suite passed (official score of at least half its questions: 40/80)",
        ),
        (
            "editions_total",
            pl.Int64,
            "Editions of the suite that have questions in the warehouse (the ones required to be ranked)",
        ),
        ("passed_all", pl.Boolean, "Passed every required edition"),
        (
            "p_pass",
            pl.Float64,
            "Exact chance of passing every required edition again if each question were redrawn at the "
            "model's observed rate: product of P(Binomial(80, score/80) >= 40)",
        ),
        ("invalid_count", pl.Int64, "Active questions with no extracted answer (error, empty, unparseable)"),
        ("missing_count", pl.Int64, "Active questions with no inference row yet"),
        ("strict_compliance", pl.Float64, "Share of calls answered with exactly one letter"),
        ("avg_latency_ms", pl.Int64, "Total latency / calls, rounded half up"),
        ("p50_latency_ms", pl.Float64, "Median latency"),
        ("p95_latency_ms", pl.Float64, "95th-percentile latency"),
        ("prompt_tokens", pl.Int64, "Prompt tokens, all calls"),
        ("completion_tokens", pl.Int64, "Completion tokens (reasoning included), all calls"),
        ("reasoning_tokens", pl.Int64, "Reasoning tokens, all calls"),
        ("tokens_per_question", pl.Float64, "Prompt plus completion tokens per call"),
        ("cost_usd", pl.Float64, "Cost reported by the endpoint"),
        ("estimated_cost_usd", pl.Float64, "Tokens x the newest model_pricing snapshot"),
        ("pricing_fetched_at", pl.Datetime("us", "UTC"), "When that price snapshot was taken"),
        ("effective_cost_usd", pl.Float64, "Reported cost when every call carries one, else estimated"),
        ("cost_source", pl.String, "'reported' or 'estimated': where effective_cost_usd comes from"),
        ("cost_per_correct_usd", pl.Float64, "effective_cost_usd per technical point"),
        ("replicates", pl.Int64, "Complete replicates of the key (see run_variance)"),
        (
            "replicate_spread",
            pl.String,
            "Official score range over the replicates ('232–235'); NULL with one",
        ),
        (
            "complete",
            pl.Boolean,
            "The canonical run of every edition of the suite is complete (every active question replied, "
            "no error row; imported: listed by its summary). Only these are ranked",
        ),
        (
            "retired",
            pl.Boolean,
            "The model catalogue's newest expiration_date for the model has come (as_of day, else today, "
            "UTC): kept and ranked, never requested again",
        ),
    ),
    "leaderboard_by_edition": _columns(
        ("model_key", pl.String, "Model configuration key"),
        ("edition", pl.Int32, "Edition number"),
        ("official_score", pl.Int64, "Correct answers plus annulled questions"),
        ("official_total", pl.Int64, "Questions in the edition (80)"),
        ("official_accuracy", pl.Float64, "official_score / official_total"),
        ("technical_score", pl.Int64, "Correct answers on active questions"),
        ("technical_total", pl.Int64, "Active questions"),
        ("technical_accuracy", pl.Float64, "technical_score / technical_total"),
        ("passed", pl.Boolean, "Official score of at least 40/80: the candidate passes the 1st phase"),
        ("p_pass", pl.Float64, "Exact P(Binomial(80, score/80) >= 40): passing again at the observed rate"),
        ("invalid_count", pl.Int64, "Active questions with no extracted answer"),
        ("missing_count", pl.Int64, "Active questions with no inference row yet"),
        ("strict_compliance", pl.Float64, "Share of calls answered with exactly one letter"),
        ("avg_latency_ms", pl.Int64, "Total latency / calls, rounded half up"),
        ("prompt_tokens", pl.Int64, "Prompt tokens"),
        ("completion_tokens", pl.Int64, "Completion tokens (reasoning included)"),
        ("reasoning_tokens", pl.Int64, "Reasoning tokens"),
        ("cost_usd", pl.Float64, "Cost reported by the endpoint"),
        ("complete", pl.Boolean, "The canonical run is complete and every active question has a row"),
        (
            "run_id",
            pl.String,
            "The run counted: the newest complete run (before the as_of day, if set); with none complete, "
            "the newest started run, shown but never ranked",
        ),
        (
            "estimated_cost_usd",
            pl.Float64,
            "Tokens x the price snapshot (the run's summary, else model_pricing)",
        ),
        ("effective_cost_usd", pl.Float64, "Reported cost when every call carries one, else estimated"),
        ("cost_source", pl.String, "'reported' or 'estimated': where effective_cost_usd comes from"),
    ),
    "leaderboard_by_area": _columns(
        ("model_key", pl.String, "Model configuration key"),
        ("area", pl.String, "Legal area"),
        ("area_order", pl.Int32, "First question number of the area (display order)"),
        ("correct", pl.Int64, "Correct answers on active questions of the area"),
        ("total", pl.Int64, "Active questions of the area"),
        ("accuracy", pl.Float64, "correct / total"),
    ),
    "pairwise_comparison": _columns(
        ("model_a", pl.String, "First model key"),
        ("model_b", pl.String, "Second model key"),
        ("n_shared", pl.Int64, "Active questions both answered"),
        ("accuracy_a", pl.Float64, "Accuracy of model_a on the shared questions"),
        ("accuracy_b", pl.Float64, "Accuracy of model_b on the shared questions"),
        ("a_only_correct", pl.Int64, "Shared questions only model_a got right"),
        ("b_only_correct", pl.Int64, "Shared questions only model_b got right"),
        ("p_value", pl.Float64, "Exact two-sided McNemar p-value"),
        ("p_holm", pl.Float64, "p-value after Holm's correction over all pairs of ranked (complete) keys"),
        ("significant", pl.Boolean, "p_holm < 0.05"),
    ),
    "item_analysis": _columns(
        ("qid", pl.String, "Question id"),
        ("edition", pl.Int32, "Edition number"),
        ("number", pl.Int32, "Question number"),
        ("area", pl.String, "Legal area"),
        ("correct", pl.String, "Correct letter per the definitive key"),
        ("status", pl.String, "'active' or 'annulled'"),
        ("n_models", pl.Int64, "Model keys with a row for the question (offline baselines left out)"),
        ("share_correct", pl.Float64, "Share of those keys that got it right (NULL when none answered it)"),
        ("discrimination", pl.Float64, "Item-rest point-biserial correlation across keys"),
        (
            "answer_distribution",
            pl.Struct({"A": pl.Int64, "B": pl.Int64, "C": pl.Int64, "D": pl.Int64, "none": pl.Int64}),
            "How many keys chose each letter (none: no extracted answer)",
        ),
        ("modal_answer", pl.String, "Letter most keys chose"),
        ("modal_share", pl.Float64, "Share of keys that chose it"),
        (
            "flag",
            pl.String,
            "'possible_key_problem', 'hard' (under 25% right, of at least 3 models), 'annulled' or NULL",
        ),
    ),
    "provider_summary": _columns(
        ("provider", pl.String, "Who makes the models (grouped case-insensitively; most used spelling)"),
        ("n_keys", pl.UInt32, "Complete model keys of the provider"),
        ("best_key", pl.String, "Its key with the best official accuracy"),
        ("best_accuracy", pl.Float64, "That key's official accuracy"),
        ("mean_accuracy", pl.Float64, "Mean official accuracy of its complete keys"),
        ("min_accuracy", pl.Float64, "Lowest official accuracy of its complete keys"),
        ("max_accuracy", pl.Float64, "Highest official accuracy of its complete keys"),
        ("accuracy_range", pl.Float64, "max_accuracy - min_accuracy"),
        (
            "mean_cost_usd",
            pl.Float64,
            "Mean effective cost (reported, else estimated) over keys with a known cost",
        ),
        ("n_keys_with_cost", pl.UInt32, "Keys whose cost is known (the mean's denominator)"),
        ("total_cost_usd", pl.Float64, "Reported cost of all its keys; NULL unless every key reports one"),
        (
            "total_estimated_cost_usd",
            pl.Float64,
            "Estimated cost of all its keys; NULL unless every key has one",
        ),
    ),
    "edition_deltas": _columns(
        ("model_key", pl.String, "Model configuration key"),
        ("first_edition", pl.Int32, "Earliest edition the key sat"),
        ("last_edition", pl.Int32, "Latest edition the key sat"),
        ("first_accuracy", pl.Float64, "Official accuracy on the earliest edition"),
        ("last_accuracy", pl.Float64, "Official accuracy on the latest edition"),
        ("delta", pl.Float64, "last_accuracy - first_accuracy"),
        (
            "official_delta_pp",
            pl.Float64,
            "Official accuracy change, first to last edition, in percentage points",
        ),
        (
            "technical_delta_pp",
            pl.Float64,
            "Technical accuracy change, first to last edition, in percentage points",
        ),
        (
            "fisher_p",
            pl.Float64,
            "Two-sided Fisher exact p of correct vs wrong (active questions) between the two editions; "
            "per model, NOT corrected for multiple comparisons",
        ),
    ),
    "pareto_frontier": _columns(
        ("model_key", pl.String, "Model configuration key"),
        ("label", pl.String, "Display name"),
        ("complete", pl.Boolean, "Answered every active question"),
        ("cost_usd", pl.Float64, "Cost: reported, else estimated"),
        ("cost_source", pl.String, "'reported' or 'estimated'"),
        ("accuracy", pl.Float64, "Official accuracy"),
        ("on_frontier", pl.Boolean, "Complete key with a cost that no key costing no more beats on accuracy"),
    ),
    "runs": _columns(
        ("run_id", pl.String, "Logical run: live:<key>:r<k>, baseline:<key>, or the published folder name"),
        ("model_key", pl.String, "Model configuration key"),
        ("source", pl.String, "'live', 'imported' or 'baseline'"),
        (
            "replicate",
            pl.Int64,
            "Lowest replicate index its cells got (k-th complete run of a cell); NULL: none",
        ),
        ("started_at", pl.Datetime("us", "UTC"), "First answer of the run"),
        (
            "completed_at",
            pl.Datetime("us", "UTC"),
            "When its last completed cell completed (summary time if imported)",
        ),
        ("editions", pl.List(pl.Int32), "Editions the run completed"),
        ("complete", pl.Boolean, "It completed every edition it has rows in (an aborted run: false)"),
    ),
    "run_variance": _columns(
        ("model_key", pl.String, "Model configuration key with at least one complete replicate"),
        ("runs", pl.Int64, "Complete replicates (every required edition has a k-th complete run)"),
        ("score_mean", pl.Float64, "Mean official score summed over the editions"),
        ("score_min", pl.Int64, "Lowest official score over the replicates"),
        ("score_max", pl.Int64, "Highest official score over the replicates"),
        ("score_sd", pl.Float64, "Sample standard deviation of the score (NULL with one replicate)"),
        ("flip_rate", pl.Float64, "Share of active questions whose answer differs between replicates"),
    ),
    "latency_accuracy_correlation": _columns(
        ("latency_measure", pl.String, "Latency column correlated (p50_latency_ms)"),
        ("accuracy_measure", pl.String, "Accuracy column correlated (official_accuracy)"),
        ("spearman_rho", pl.Float64, "Spearman rank correlation across complete keys"),
        ("p_value", pl.Float64, "Two-sided p-value"),
        ("n", pl.Int64, "Complete keys compared"),
    ),
    "contamination_by_cutoff": _columns(
        ("model_key", pl.String, "Model configuration key (NULL on the pooled row)"),
        ("knowledge_cutoff", pl.Date, "The model's training-data cutoff (NULL on the pooled row)"),
        ("editions_after", pl.UInt32, "Editions held after the cutoff (NULL on the pooled row)"),
        ("correct_after", pl.Int64, "Correct answers on those editions (active questions)"),
        ("total_after", pl.Int64, "Active questions of those editions"),
        ("editions_before", pl.UInt32, "Editions held on or before the cutoff (NULL on the pooled row)"),
        ("correct_before", pl.Int64, "Correct answers on those editions"),
        ("total_before", pl.Int64, "Active questions of those editions"),
        ("accuracy_after", pl.Float64, "Technical accuracy after the cutoff"),
        ("accuracy_before", pl.Float64, "Technical accuracy on or before the cutoff"),
        ("delta", pl.Float64, "accuracy_after - accuracy_before (raw: confounds the exams' difficulty)"),
        (
            "questions_after",
            pl.Int64,
            "Questions after the cutoff the effect rests on (answered by the key and by at least one other)",
        ),
        ("questions_before", pl.Int64, "Questions on or before the cutoff the effect rests on"),
        (
            "effect_log_odds",
            pl.Float64,
            "Change in log-odds of a right answer after the cutoff, net of each question's difficulty from "
            "the Rasch fit without this key (negative: worse on unseen exams); NULL when not estimable",
        ),
        ("effect_ci_low", pl.Float64, "Lower end of the effect's 95% Wald interval"),
        ("effect_ci_high", pl.Float64, "Upper end of the effect's 95% Wald interval"),
        ("p_value", pl.Float64, "Two-sided Wald p-value of no effect"),
        (
            "note",
            pl.String,
            "Why the effect could not be estimated (e.g. every question after the cutoff); on the pooled "
            "row, what it pools",
        ),
        (
            "pooled",
            pl.Boolean,
            "The last row, when some key has a cutoff: every such key together (counts summed, one effect "
            "shared, each key its own level: the row of contamination_pooled); false on a key's row",
        ),
    ),
    "contamination_pooled": _columns(
        ("n_models", pl.Int64, "Model keys with a knowledge cutoff"),
        ("n_models_estimable", pl.Int64, "Of those, keys with questions on both sides of their cutoff"),
        ("questions_after", pl.Int64, "Questions after the cutoffs, over those keys"),
        ("questions_before", pl.Int64, "Questions on or before the cutoffs, over those keys"),
        (
            "effect_log_odds",
            pl.Float64,
            "One change in log-odds after the cutoff shared by those keys (each its own level), net of "
            "difficulty; NULL when not estimable",
        ),
        ("effect_ci_low", pl.Float64, "Lower end of the pooled effect's 95% Wald interval"),
        ("effect_ci_high", pl.Float64, "Upper end of the pooled effect's 95% Wald interval"),
        ("p_value", pl.Float64, "Two-sided Wald p-value of no pooled effect"),
        ("note", pl.String, "Why the pooled effect could not be estimated"),
    ),
    "item_abilities": _columns(
        ("model_key", pl.String, "Model configuration key (every key with an answer, complete or not)"),
        (
            "ability",
            pl.Float64,
            "Rasch ability θ: log-odds of a right answer on a question of average difficulty (marginal "
            "maximum likelihood; the editions' mean difficulty, weighted by questions, is 0)",
        ),
        ("ability_se", pl.Float64, "Standard error of the ability (inverse observed information)"),
        ("ability_ci_low", pl.Float64, "ability − 1.96 × ability_se"),
        ("ability_ci_high", pl.Float64, "ability + 1.96 × ability_se"),
        ("n_questions", pl.Int64, "Active questions the key answered in its canonical runs"),
        ("n_correct", pl.Int64, "Of those, answered right"),
        (
            "link_group",
            pl.Int64,
            "Keys sharing a number are on one scale (joined by editions they answered); keys of different "
            "groups share no edition, directly or through other keys",
        ),
    ),
    "item_difficulties": _columns(
        ("qid", pl.String, "Question id (active questions only)"),
        ("edition", pl.Int32, "Edition number"),
        ("number", pl.Int32, "Question number"),
        ("area", pl.String, "Legal area"),
        ("n_models", pl.Int64, "Model keys that answered it (canonical runs)"),
        ("n_correct", pl.Int64, "Of those, answered right"),
        ("share_correct", pl.Float64, "n_correct / n_models"),
        (
            "difficulty",
            pl.Float64,
            "Rasch difficulty b: posterior mean given every key's answer (higher is harder; 0 is the "
            "average question); NULL when no key answered it",
        ),
        ("difficulty_sd", pl.Float64, "Posterior standard deviation of the difficulty"),
        ("difficulty_ci_low", pl.Float64, "difficulty − 1.96 × difficulty_sd"),
        ("difficulty_ci_high", pl.Float64, "difficulty + 1.96 × difficulty_sd"),
        ("edition_difficulty", pl.Float64, "The edition's mean difficulty μ (fixed effect)"),
        ("edition_difficulty_se", pl.Float64, "Standard error of the edition's mean difficulty"),
    ),
    "key_audit": _columns(
        ("qid", pl.String, "Question id"),
        ("edition", pl.Int32, "Edition number"),
        ("number", pl.Int32, "Question number"),
        ("correct", pl.String, "The published key's letter (NULL when annulled)"),
        ("status", pl.String, "'active' or 'annulled'"),
        ("key_status", pl.String, "'preliminary' or 'definitive' key, where the answer keys say; else NULL"),
        ("n_models", pl.Int64, "Model keys that answered it (offline baselines left out)"),
        ("weight_a", pl.Float64, "Share of the ability-weighted votes for (A)"),
        ("weight_b", pl.Float64, "Share of the ability-weighted votes for (B)"),
        ("weight_c", pl.Float64, "Share of the ability-weighted votes for (C)"),
        ("weight_d", pl.Float64, "Share of the ability-weighted votes for (D)"),
        ("consensus", pl.String, "The letter with the largest weighted share"),
        ("consensus_weight", pl.Float64, "Its weighted share"),
        ("key_weight", pl.Float64, "The published letter's weighted share"),
        (
            "agreeing_models",
            pl.Int64,
            "Models with a vote weight above 0 that chose the consensus letter (baselines never vote)",
        ),
        ("difficulty", pl.Float64, "Rasch difficulty of the question (see item_difficulties)"),
        (
            "suspicious",
            pl.Boolean,
            "Strong keys agree on another letter than the key (rule: docs/item_response.md); a person "
            "should check the question against the definitive key",
        ),
        (
            "possibly_superseded",
            pl.Boolean,
            "A reform of the question's area came into force after its exam (question_law_currency; a note "
            "overrides it): a suspicious key here is listed first, since later law may explain it",
        ),
        (
            "reforms_after",
            pl.List(pl.String),
            "The reforms (legal_reforms) of the question's area in force after its exam",
        ),
    ),
}


DESCRIBED_TABLES["suites"] = _columns(
    ("suite", pl.String, "Suite name (`--suite NAME`): a set of editions a leaderboard ranks over"),
    ("description", pl.String, "What the suite is, from the editions registry"),
    (
        "is_default",
        pl.Boolean,
        "The suite `oabench leaderboard` and the tables without `_by_suite` rank (oabench-2026)",
    ),
    ("editions", pl.List(pl.Int32), "Every edition of the suite (`all`: every edition known)"),
    (
        "editions_ingested",
        pl.List(pl.Int32),
        "Its editions with questions in the warehouse: those a key must complete to be ranked",
    ),
    ("questions", pl.Int64, "Questions of those editions"),
    ("model_keys", pl.Int64, "Model keys with a counted run in at least one of its editions"),
    ("ranked_keys", pl.Int64, "Model keys ranked in it: complete on every one of its ingested editions"),
    (
        "questions_current_law",
        pl.Int64,
        "Of its questions, those not flagged possibly_superseded: what `leaderboard --current-law` ranks on",
    ),
    (
        "questions_possibly_superseded",
        pl.Int64,
        "Of its questions, those flagged possibly_superseded (question_law_currency): left out of the "
        "current-law view",
    ),
)

_EFFECT_COLUMNS = _columns(
    (
        "effect_log_odds",
        pl.Float64,
        "Change in log-odds of a right answer on possibly-superseded questions, net of each question's "
        "Rasch difficulty from the fit without this key; NULL when not estimable",
    ),
    ("effect_ci_low", pl.Float64, "Lower end of the effect's 95% Wald interval"),
    ("effect_ci_high", pl.Float64, "Upper end of the effect's 95% Wald interval"),
    ("p_value", pl.Float64, "Two-sided Wald p-value of no effect"),
)

DESCRIBED_TABLES["legal_reforms"] = _columns(
    ("reform", pl.String, "Short id of the reform (registry/legal_reforms.toml)"),
    ("act", pl.String, "The act's number, as planalto.gov.br titles it"),
    ("name", pl.String, "What the act is usually called"),
    ("published", pl.Date, "Date of its publication in the Diário Oficial da União"),
    ("in_force", pl.Date, "Date it came into force (vigência): what a question's exam date is compared with"),
    (
        "in_force_rule",
        pl.String,
        "How in_force follows from the act's vigência clause (phases, vacatio legis)",
    ),
    ("areas", pl.List(pl.String), "The OAB areas it touches (the editions registry's area names)"),
    ("source_url", pl.String, "The act's official text on planalto.gov.br"),
    ("verified", pl.String, "What was checked of its number and dates, and any doubt that remains"),
    (
        "questions_flagged",
        pl.Int64,
        "Ingested questions of its areas whose exam predates in_force (the area-level flag; notes aside)",
    ),
)
DESCRIBED_TABLES["question_law_currency"] = _columns(
    ("qid", pl.String, "Question id"),
    ("edition", pl.Int32, "Edition number"),
    ("number", pl.Int32, "Question number"),
    ("exam_date", pl.Date, "Date of the question's exam"),
    ("area", pl.String, "Legal area"),
    (
        "reforms_after",
        pl.List(pl.String),
        "Reforms (legal_reforms) touching the area that came into force after the exam, oldest first",
    ),
    ("area_flag", pl.Boolean, "reforms_after is not empty: the area-level flag, before any note"),
    ("note_verdict", pl.String, "'outdated' or 'holds' from registry/law_currency_notes.toml; else NULL"),
    ("note", pl.String, "The note: what changed, or why the official answer still holds"),
    ("note_source", pl.String, "Who says so: a URL or a citation"),
    (
        "possibly_superseded",
        pl.Boolean,
        "To read with care: the note's verdict when there is one (outdated: true, holds: false), else the "
        "area-level flag. Not a legal judgment that the official answer is wrong today",
    ),
)
DESCRIBED_TABLES["law_currency_effect"] = (
    *_columns(
        ("model_key", pl.String, "Model configuration key (NULL on the pooled row)"),
        ("correct_superseded", pl.Int64, "Right answers on possibly-superseded active questions"),
        ("total_superseded", pl.Int64, "Possibly-superseded active questions the key answered"),
        ("correct_current", pl.Int64, "Right answers on the other (current-law) active questions"),
        ("total_current", pl.Int64, "Current-law active questions the key answered"),
        ("accuracy_superseded", pl.Float64, "correct_superseded / total_superseded"),
        ("accuracy_current", pl.Float64, "correct_current / total_current"),
        (
            "delta",
            pl.Float64,
            "accuracy_superseded - accuracy_current (raw: confounds the questions' difficulty)",
        ),
        (
            "questions_superseded",
            pl.Int64,
            "Possibly-superseded questions the effect rests on (answered by the key and at least one other)",
        ),
        ("questions_current", pl.Int64, "Current-law questions the effect rests on"),
    ),
    *_EFFECT_COLUMNS,
    *_columns(
        (
            "contested_superseded",
            pl.Int64,
            "Possibly-superseded questions whose key the key audit calls suspicious (strong keys agree on "
            "another letter) and this key answered with that consensus letter",
        ),
        ("note", pl.String, "Why the effect could not be estimated; on the pooled row, what it pools"),
        ("pooled", pl.Boolean, "The last row: every key together, one shared effect, each key its own level"),
    ),
)
DESCRIBED_TABLES["leaderboard_current_law"] = _columns(
    ("suite", pl.String, "Suite (`suites` table) the row is computed over"),
    ("rank", pl.Int64, "Dense rank by official score on the current-law questions, among complete keys"),
    ("model_key", pl.String, "Model configuration key"),
    ("complete", pl.Boolean, "Complete on every ingested edition of the suite (as in leaderboard_by_suite)"),
    (
        "official_score",
        pl.Int64,
        "Right answers on active current-law questions + annulled current-law questions (credited)",
    ),
    ("official_total", pl.Int64, "Current-law questions of the suite's ingested editions"),
    ("official_accuracy", pl.Float64, "official_score / official_total"),
    ("official_ci_low", pl.Float64, "Lower end of the 95% Wilson interval, on the official scale"),
    ("official_ci_high", pl.Float64, "Upper end of the 95% Wilson interval, on the official scale"),
    ("technical_score", pl.Int64, "Right answers on active current-law questions"),
    ("technical_total", pl.Int64, "Active current-law questions"),
    ("technical_accuracy", pl.Float64, "technical_score / technical_total"),
    ("rank_all_questions", pl.Int64, "The key's rank on every question of the suite (leaderboard_by_suite)"),
    ("official_accuracy_all_questions", pl.Float64, "Its official accuracy on every question of the suite"),
)

# Tables with a suite dimension: `<table>_by_suite` holds every suite's rows behind a leading `suite`
# column; the plain table holds the default suite's (`leaderboard_by_area` excepted: it spans every edition).
SUITE_COLUMN = Column("suite", pl.String, "Suite (`suites` table) the row is computed over")
BY_SUITE: dict[str, str] = {
    f"{table}_by_suite": table
    for table in (
        "leaderboard",
        "leaderboard_by_area",
        "pairwise_comparison",
        "provider_summary",
        "edition_deltas",
        "pareto_frontier",
        "latency_accuracy_correlation",
        "run_variance",
    )
}
DESCRIBED_TABLES.update({name: (SUITE_COLUMN, *DESCRIBED_TABLES[base]) for name, base in BY_SUITE.items()})


def table_columns(table: str) -> tuple[Column, ...]:
    """The columns of a contracted table, or the described-only columns of a leaderboard table."""
    return TABLES[table] if table in TABLES else DESCRIBED_TABLES[table]


def column_names(table: str) -> tuple[str, ...]:
    """The table's column names in contract order: what its builder in `core/` selects last."""
    return tuple(c.name for c in table_columns(table))


def column_schema(table: str) -> dict[str, pl.DataType | type[pl.DataType]]:
    """The table's columns and types, for a builder that casts (or starts empty) itself."""
    return {c.name: c.dtype for c in table_columns(table)}


def conform(table: str, frame: pl.DataFrame) -> pl.DataFrame:
    """Cast and order `frame` to the table's contract; extra columns are an error, missing ones become NULL."""
    columns = TABLES.get(table)
    if columns is None:
        return frame
    names = {c.name for c in columns}
    extra = [name for name in frame.columns if name not in names]
    if extra:
        raise ValueError(f"table {table!r} has no columns {extra}")
    return frame.select(
        [
            pl.col(c.name).cast(c.dtype)
            if c.name in frame.columns
            else pl.lit(None, dtype=c.dtype).alias(c.name)
            for c in columns
        ]
    )


def csv_ready(frame: pl.DataFrame) -> pl.DataFrame:
    """The frame as every CSV we write carries it (the report's and the site's exports, `--format csv`).

    CSV has no nested types: struct columns become JSON text, lists comma-separated values
    (`runs.editions`, `suites.editions`, ...). A text cell that a spreadsheet would evaluate as a formula
    (it starts with `=`, `+`, `-`, `@`, a tab or a carriage return: a model label, a reply) gets a leading
    apostrophe (`core/text_safety.py`). Floats lose the binary noise of their sums (`without_float_noise`).
    """
    nested = [name for name, dtype in frame.schema.items() if isinstance(dtype, pl.Struct)]
    lists = [name for name, dtype in frame.schema.items() if isinstance(dtype, pl.List)]
    flat = without_float_noise(frame).with_columns(
        *(pl.col(name).struct.json_encode() for name in nested),
        *(pl.col(name).cast(pl.List(pl.String)).list.join(",") for name in lists),
    )
    texts = [name for name, dtype in flat.schema.items() if dtype == pl.String]
    return flat.with_columns(*(spreadsheet_safe_expr(name) for name in texts))


def empty_frame(table: str) -> pl.DataFrame:
    """A table with its contracted columns and no rows."""
    return pl.DataFrame(schema={c.name: c.dtype for c in TABLES[table]})


# The tables built from every scored cell in one pass (`core/leaderboard.py`), each its own Dagster asset
# (`scoring/analysis.py`), in the order they are listed and written. Light on purpose: the CLI imports it
# to decide what to rebuild without importing Dagster or the statistics.
ANALYSIS_TABLES: tuple[str, ...] = (
    "leaderboard",
    "leaderboard_by_edition",
    "leaderboard_by_area",
    "pairwise_comparison",
    "item_analysis",
    "provider_summary",
    "edition_deltas",
    "pareto_frontier",
    "latency_accuracy_correlation",
    "contamination_by_cutoff",
    "contamination_pooled",
    "runs",
    "run_variance",
    "item_abilities",
    "item_difficulties",
    "key_audit",
    "suites",
    *BY_SUITE,
    "legal_reforms",
    "question_law_currency",
    "law_currency_effect",
    "leaderboard_current_law",
)

# What each analysis table holds, as its asset's description in the UI (first line: the summary).
ANALYSIS_DESCRIPTIONS: dict[str, str] = {
    "leaderboard": "One row per model key: official and technical score with 95% Wilson intervals, rank "
    "and rank interval among complete keys, editions passed, p_pass, cost, latency and replicate spread.\n\n"
    "The default suite's ranking (oabench-2026, the 43rd-45th editions: `suites`; every suite's: "
    "`leaderboard_by_suite`). Each cell counts through its canonical run: the newest complete run "
    "(completed before the end of `as_of`, UTC, when set). Keys without a complete run of every edition "
    "of the suite are shown, never ranked.",
    "leaderboard_by_edition": "One row per model key and edition: the canonical run's scores, whether it "
    "passed (40/80), p_pass, invalid and missing answers, tokens and cost; `run_id` says which run counted.",
    "leaderboard_by_area": "One row per model key and legal area: correct answers on active questions, the "
    "area's active questions and the accuracy, in the booklet's area order, over every edition the key "
    "ran (per suite: `leaderboard_by_area_by_suite`).",
    "pairwise_comparison": "One row per pair of ranked (complete) keys: their accuracies on the shared "
    "questions, the discordant counts, the exact McNemar p-value and its Holm-corrected value.",
    "item_analysis": "One row per question: how many keys got it right, its discrimination across keys, "
    "the answer distribution and a flag when most keys agree against the official key.",
    "provider_summary": "One row per provider (case-insensitive) over its complete keys: best key, mean, "
    "min and max official accuracy, mean and total cost.",
    "edition_deltas": "One row per complete key: official and technical accuracy change from its first to "
    "its last edition (percentage points) with a Fisher exact p, not corrected for multiple comparisons.",
    "pareto_frontier": "One row per key: cost (reported, else estimated) and official accuracy, and whether "
    "no key costing no more beats it (`on_frontier`, complete keys with a cost only).",
    "latency_accuracy_correlation": "Spearman's rho between p50 latency and official accuracy across "
    "complete keys, with its two-sided p-value: is a slower model a more accurate one?",
    "contamination_by_cutoff": "One row per key with a knowledge cutoff: technical accuracy on editions held "
    "after the cutoff versus on or before it, and the change in log-odds after the cutoff net of each "
    "question's difficulty (from the Rasch fit without that key) with a 95% interval and a p-value "
    "(a drop after the cutoff hints at contamination); then one pooled row (`pooled`) for all of them.",
    "contamination_pooled": "One row: the training-cutoff effect shared by every key with a knowledge "
    "cutoff (each key its own level), net of question difficulty, with a 95% interval and a p-value.",
    "item_abilities": "One row per key: its Rasch ability (log-odds of a right answer on an average "
    "question) with a 95% interval, comparable across keys that ran different editions.",
    "item_difficulties": "One row per active question: its Rasch difficulty with a 95% interval, how many "
    "keys answered it, and its edition's mean difficulty.",
    "key_audit": "One row per question: the ability-weighted share of each letter among the keys' answers, "
    "the consensus letter and its share, and `suspicious` when strong keys agree against the key.",
    "runs": "One row per run (live replicate, baseline or imported folder): when it started and completed, "
    "which editions it completed, its replicate index, and whether it is complete.",
    "run_variance": "One row per key with complete replicates: how many, the mean, range and standard "
    "deviation of the official score, and how often an answer flips between replicates.",
    "suites": "One row per suite (a named set of editions, from the editions registry): its editions, those "
    "ingested, its questions, and how many model keys ran in it and are ranked in it.",
    "legal_reforms": "One row per legal reform since 2010 (registry/legal_reforms.toml): its act, the date "
    "it came into force, the OAB areas it touches, its official source, and how many questions it flags.",
    "question_law_currency": "One row per question: the reforms of its area in force after its exam and "
    "`possibly_superseded` (a per-question note overrides the area-level flag).\n\nThe area-level flag "
    "marks questions to read with care; it is not a legal judgment (docs/law_currency.md).",
    "law_currency_effect": "One row per model key: accuracy on possibly-superseded against current-law "
    "questions and the change in log-odds net of Rasch difficulty, with a 95% interval and a p-value; then "
    "one pooled row (`pooled`).",
    "leaderboard_current_law": "One row per suite and model key: the ranking on the questions not flagged "
    "possibly_superseded (`oabench leaderboard --current-law`), beside the rank on every question.",
}
# The default suite's tables say so; each `_by_suite` twin holds every suite's rows.
for _name in ("pairwise_comparison", "provider_summary", "edition_deltas", "pareto_frontier"):
    ANALYSIS_DESCRIPTIONS[_name] += f" Over the default suite's editions (every suite: `{_name}_by_suite`)."
for _name in ("latency_accuracy_correlation", "run_variance"):
    ANALYSIS_DESCRIPTIONS[_name] += (
        f"\n\nOver the default suite's editions (every suite: `{_name}_by_suite`)."
    )
ANALYSIS_DESCRIPTIONS.update(
    {
        name: f"Every suite's `{base}`: its rows for each suite (`suites`), behind a leading `suite` column."
        + "\n\n"
        + ANALYSIS_DESCRIPTIONS[base].partition("\n")[0]
        for name, base in BY_SUITE.items()
    }
)
