"""Memory with long reasoning: peak RSS of `oabench run` per MB of reasoning the cell receives.

One edition (45) is ingested from a loopback mirror of the official host (`../shared/oab/mirror`); a
loopback OpenAI-compatible server answers every question twice over, as two models: `acme/plain` (a
letter, no reasoning: the reference) and `acme/thinker` (the same letter with REASONING_MB of reasoning
per reply). Each is one `oabench run --models KEY --editions 45` process, as a user runs it; its peak RSS
is the kernel's (`wait4`'s `ru_maxrss`). The figure is the thinker's extra peak RSS over the reference, in
MB per MB of reasoning the cell received (80 replies × REASONING_MB): 1.0 would be one copy of every
reasoning held at once; each copy more (the response log read whole, its lines split, the rows, the
table) adds about one.

Run: .venv/bin/python benchmarks/reasoning_memory.py [--reasoning-mb 1] [--concurrency 20]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from oabench_pipeline.warehouse import Warehouse
from oabench_pipeline_tests.conftest import shared_oab_dir
from oabench_pipeline_tests.inference.replay import TEST_KEY, TEST_KEY_ENV, question_texts
from oabench_pipeline_tests.pipeline_env import write_models_file
from oabench_pipeline_tests.servers.openai_replay import RecordedReply, ReplayServer
from oabench_pipeline_tests.servers.static_files import StaticFileServer

OABENCH = str(Path(sys.executable).with_name("oabench"))
EDITION = "45"
PLAIN, THINKER = "acme/plain", "acme/thinker"


def peak_rss_mb(args: list[str], env: dict[str, str]) -> float:
    """Run `oabench ARGS`; its peak resident set in MB (it must succeed)."""
    process = subprocess.Popen([OABENCH, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert process.stdout is not None
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"`oabench {' '.join(args)}` failed ({process.returncode}):\n{output.decode()}")
    return usage.ru_maxrss / 1024  # KiB on Linux


def reasoning_text(megabytes: float, seed: int) -> str:
    """ASCII prose-like text of about `megabytes` MB, different per reply (no interning, no sharing)."""
    line = f"step {seed}: weighing the choices against the statute, article by article. "
    return (line * (int(megabytes * 1_000_000) // len(line) + 1))[: int(megabytes * 1_000_000)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reasoning-mb", type=float, default=1.0)
    parser.add_argument("--concurrency", type=int, default=20)
    options = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="oabench-reasoning-") as tmp,
        StaticFileServer(shared_oab_dir() / "mirror") as mirror,
    ):
        root = Path(tmp)
        env = {
            **os.environ,
            "OABENCH_WAREHOUSE": str(root / "warehouse" / "oabench.duckdb"),
            "DAGSTER_HOME": str(root / "dagster_home"),
            "OABENCH_SOURCE_BASE_URL": mirror.base_url,
            TEST_KEY_ENV: TEST_KEY,
        }
        subprocess.run([OABENCH, "ingest", "--editions", EDITION], env=env, check=True, capture_output=True)
        texts = question_texts(Warehouse(root / "warehouse" / "oabench.duckdb"))
        texts = {qid: text for qid, text in texts.items() if qid.startswith(f"oab-{EDITION}-")}
        replies = {
            (PLAIN, text): RecordedReply("Resposta: A", completion_tokens=3) for text in texts.values()
        }
        replies |= {
            (THINKER, text): RecordedReply(
                "Resposta: A", reasoning=reasoning_text(options.reasoning_mb, n), completion_tokens=3
            )
            for n, text in enumerate(texts.values())
        }
        reasoning_mb = sum(len(r.reasoning or "") for r in replies.values()) / 1_000_000
        with ReplayServer(replies=replies, api_key=TEST_KEY) as server:
            entries = [
                {
                    "id": m,
                    "base_url": server.base_url,
                    "api_key_env": TEST_KEY_ENV,
                    "concurrency": options.concurrency,
                }
                for m in (PLAIN, THINKER)
            ]
            env["OABENCH_MODELS_FILE"] = str(write_models_file(root / "models.toml", entries))
            run = ["run", "--editions", EDITION, "--models"]
            reference = peak_rss_mb([*run, PLAIN], env)
            thinker = peak_rss_mb([*run, THINKER], env)
    extra = thinker - reference
    print(
        f"replies: {len(texts)} per model, {options.reasoning_mb:g} MB of reasoning each ({reasoning_mb:.0f} MB)"
    )
    print(f"peak RSS, no reasoning (reference): {reference:7.0f} MB")
    print(
        f"peak RSS, with reasoning:           {thinker:7.0f} MB   ratio to reference {thinker / reference:.2f}"
    )
    print(f"extra peak RSS per MB of reasoning: {extra / reasoning_mb:7.2f} MB/MB")


if __name__ == "__main__":
    main()
