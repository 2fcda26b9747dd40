"""The Dagster UI's GraphQL API as a person's clicks: the queries and mutations behind the asset graph, "Add
partition", "Materialize" and a run's page, for the UI test in `test_browser.py`."""

from __future__ import annotations

import time

from oabench_pipeline.core.tables import ANALYSIS_TABLES
from oabench_pipeline_tests.servers.dagster_webserver import POLL_S, DagsterWebserver

EXPECTED_GROUPS = {
    "editions": "sources",
    "exam_pdfs": "sources",
    "answer_keys": "exams",
    "questions": "exams",
    "models": "inference",
    "model_catalogue": "inference",
    "catalogue_decisions": "inference",
    "model_pricing": "inference",
    "published_runs": "inference",
    "inferences": "inference",
    "scores": "scoring",
    **{table: "analysis" for table in ANALYSIS_TABLES},  # leaderboard and each analysis table
    "leaderboard_report": "reports",
    "leaderboard_site": "reports",
    "phase2_source_files": "phase2_sources",
    "phase2_items": "phase2_exams",
    "phase2_standards": "phase2_exams",
    "phase2_judge_prompts": "phase2_exams",
    "phase2_import": "phase2_answers",
    "phase2_answers": "phase2_answers",
    "phase2_judgments": "phase2_judgments",
    "phase2_scores": "phase2_scoring",
    "phase2_leaderboard": "phase2_scoring",
    "phase2_leaderboard_by_area": "phase2_scoring",
    "phase2_judge_agreement": "phase2_agreement",
    "candidate_pass_rates": "candidates",
}
TERMINAL = {"SUCCESS", "FAILURE", "CANCELED"}

ASSET_GRAPH_QUERY = """
{
  assetNodes {
    assetKey { path }
    groupName
    description
    isPartitioned
    partitionDefinition { dimensionTypes { name dynamicPartitionsDefinitionName } }
    dependencyKeys { path }
    metadataEntries {
      label
      ... on TableSchemaMetadataEntry { schema { columns { name description } } }
    }
  }
}
"""

ADD_PARTITION = """
mutation Add($repo: RepositorySelector!, $name: String!, $key: String!) {
  addDynamicPartition(repositorySelector: $repo, partitionsDefName: $name, partitionKey: $key) {
    __typename
    ... on Error { message }
  }
}
"""

LAUNCH_RUN = """
mutation Launch($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on Error { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}
"""

RUN_STATUS = """
query Status($id: ID!) {
  runOrError(runId: $id) { __typename ... on Run { status tags { key value } } }
}
"""

RUN_FAILURES = """
query Failures($id: ID!) {
  logsForRun(runId: $id) {
    ... on EventConnection {
      events { __typename ... on MessageEvent { message } ... on ErrorEvent { error { message } } }
    }
  }
}
"""

PARTITION_STATUS = """
query Partitions($key: AssetKeyInput!) {
  assetNodeOrError(assetKey: $key) {
    ... on AssetNode {
      partitionKeys
      assetPartitionStatuses { ... on DefaultPartitionStatuses { materializedPartitions failedPartitions } }
    }
  }
}
"""


def column_schema(node: dict) -> dict[str, str]:
    for entry in node["metadataEntries"]:
        if entry["label"] == "dagster/column_schema":
            return {c["name"]: c["description"] for c in entry["schema"]["columns"]}
    raise AssertionError(f"no dagster/column_schema on {node['assetKey']['path']}")


def wait_for_run(server: DagsterWebserver, run_id: str, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    status = "NOT_STARTED"
    while time.monotonic() < deadline:
        status = server.query(RUN_STATUS, {"id": run_id})["runOrError"]["status"]
        if status in TERMINAL:
            return status
        time.sleep(POLL_S)
    raise TimeoutError(f"run {run_id} still {status} after {timeout_s} s:\n{server.log_tail()}")


def failure_text(server: DagsterWebserver, run_id: str) -> str:
    events = server.query(RUN_FAILURES, {"id": run_id})["logsForRun"].get("events") or []
    lines = [
        f"{event.get('message') or ''} {(event.get('error') or {}).get('message') or ''}".strip()
        for event in events
        if event.get("error") or "Failure" in event["__typename"]
    ]
    return "\n".join(line for line in lines if line)[-4000:] or server.log_tail()
