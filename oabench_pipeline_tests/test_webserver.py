"""The Dagster UI a person lands in: a real `dagster-webserver` on loopback, driven through its GraphQL API.

The test does what a person does in the browser: looks at the asset graph (groups, descriptions, column
schemas), adds edition 44 as a partition ("Add partition" in the launch dialog), materializes
`exam_pdfs`, `answer_keys` and `questions` for it, and waits for the run to succeed. The run is started by
the webserver's run launcher in its own process, reads the official PDFs from the loopback mirror and
writes the warehouse; the test then reads the questions partition back.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from oabench_pipeline.tables import ANALYSIS_TABLES
from oabench_pipeline.warehouse import Warehouse
from oabench_pipeline_tests.servers.dagster_webserver import POLL_S, DagsterWebserver
from oabench_pipeline_tests.servers.static_files import StaticFileServer

pytestmark = pytest.mark.timeout(420)

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
}
INGEST_ASSETS = ("exam_pdfs", "answer_keys", "questions")
EDITION = "44"
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


@pytest.fixture
def webserver(tmp_path: Path, mirror_server: StaticFileServer) -> Iterator[tuple[DagsterWebserver, Path]]:
    """The webserver on a fresh instance and an empty warehouse whose official host is the loopback mirror."""
    warehouse_path = tmp_path / "warehouse" / "oabench.duckdb"
    env = {
        "OABENCH_WAREHOUSE": str(warehouse_path),
        "OABENCH_SOURCE_BASE_URL": mirror_server.base_url,
        # Nothing in this test may reach the real portal, even if a sensor were evaluated.
        "OABENCH_PORTAL_URL": mirror_server.base_url,
        "OABENCH_RAW_DIR": "",
        "OABENCH_EDITIONS_FILE": "",
        "OABENCH_MODELS_FILE": "",
    }
    with DagsterWebserver(tmp_path / "dagster_home", env) as server:
        yield server, warehouse_path


def test_ui_shows_the_asset_graph_and_ingests_an_edition(webserver: tuple[DagsterWebserver, Path]) -> None:
    server, warehouse_path = webserver

    # The asset graph, as the lineage page draws it.
    nodes = {"/".join(n["assetKey"]["path"]): n for n in server.query(ASSET_GRAPH_QUERY)["assetNodes"]}
    assert {key: nodes[key]["groupName"] for key in EXPECTED_GROUPS if key in nodes} == EXPECTED_GROUPS
    assert {n["groupName"] for n in nodes.values()} == set(EXPECTED_GROUPS.values())
    undocumented = [key for key, n in nodes.items() if not (n["description"] or "").strip()]
    assert not undocumented, f"assets without a description in the UI: {undocumented}"
    assert ["exam_pdfs"] in [d["path"] for d in nodes["questions"]["dependencyKeys"]]
    assert nodes["questions"]["isPartitioned"]
    dimensions = nodes["questions"]["partitionDefinition"]["dimensionTypes"]
    assert [d["dynamicPartitionsDefinitionName"] for d in dimensions] == ["editions"]
    assert {"qid", "stem", "choice_a", "status", "area"} <= set(_column_schema(nodes["questions"]))
    assert {"rank", "model_key", "official_accuracy"} <= set(_column_schema(nodes["leaderboard"]))
    assert {"model_a", "model_b", "p_holm"} <= set(_column_schema(nodes["pairwise_comparison"]))
    assert "McNemar" in nodes["pairwise_comparison"]["description"]
    report_deps = {"/".join(d["path"]) for d in nodes["leaderboard_report"]["dependencyKeys"]}
    assert report_deps == set(ANALYSIS_TABLES)  # the lineage draws every table feeding the report
    for key, node in nodes.items():
        schema = _column_schema(node)
        assert schema and all(schema.values()), f"{key}: columns without a description in the UI: {schema}"

    # "Add partition" in the launch dialog, then "Materialize" for exam_pdfs, answer_keys, questions.
    added = server.query(
        ADD_PARTITION, {"repo": server.repository_selector(), "name": "editions", "key": EDITION}
    )
    assert added["addDynamicPartition"]["__typename"] == "AddDynamicPartitionSuccess", added
    selector = {
        **server.repository_selector(),
        "jobName": "__ASSET_JOB",
        "assetSelection": [{"path": [key]} for key in INGEST_ASSETS],
    }
    params = {
        "selector": selector,
        "executionMetadata": {"tags": [{"key": "dagster/partition", "value": EDITION}]},
        # One worker process instead of one per step: the machine running the suite has two cores.
        "runConfigData": {"execution": {"config": {"in_process": {}}}},
    }
    launched = server.query(LAUNCH_RUN, {"params": params})["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    run_id = launched["run"]["runId"]

    status = _wait_for_run(server, run_id, timeout_s=300)
    assert status == "SUCCESS", f"run {run_id} ended {status}:\n{_failure_text(server, run_id)}"

    # The UI now shows partition 44 materialized for each asset ...
    for key in INGEST_ASSETS:
        node = server.query(PARTITION_STATUS, {"key": {"path": [key]}})["assetNodeOrError"]
        assert node["partitionKeys"] == [EDITION]
        assert node["assetPartitionStatuses"]["materializedPartitions"] == [EDITION], key
    # ... and the warehouse holds the 80 questions the run parsed from the official booklet.
    questions = Warehouse(warehouse_path).read("questions", EDITION)
    assert questions.height == 80
    assert sorted(questions["number"].to_list()) == list(range(1, 81))
    assert set(questions["edition"].to_list()) == {int(EDITION)}
    assert Warehouse(warehouse_path).read("answer_keys", EDITION).height == 80


def _column_schema(node: dict) -> dict[str, str]:
    for entry in node["metadataEntries"]:
        if entry["label"] == "dagster/column_schema":
            return {c["name"]: c["description"] for c in entry["schema"]["columns"]}
    raise AssertionError(f"no dagster/column_schema on {node['assetKey']['path']}")


def _wait_for_run(server: DagsterWebserver, run_id: str, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    status = "NOT_STARTED"
    while time.monotonic() < deadline:
        status = server.query(RUN_STATUS, {"id": run_id})["runOrError"]["status"]
        if status in TERMINAL:
            return status
        time.sleep(POLL_S)
    raise TimeoutError(f"run {run_id} still {status} after {timeout_s} s:\n{server.log_tail()}")


def _failure_text(server: DagsterWebserver, run_id: str) -> str:
    events = server.query(RUN_FAILURES, {"id": run_id})["logsForRun"].get("events") or []
    lines = [
        f"{event.get('message') or ''} {(event.get('error') or {}).get('message') or ''}".strip()
        for event in events
        if event.get("error") or "Failure" in event["__typename"]
    ]
    return "\n".join(line for line in lines if line)[-4000:] or server.log_tail()
