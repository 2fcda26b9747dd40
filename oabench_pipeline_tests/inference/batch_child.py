"""Run the batch protocol over a cell's questions in this process; `--kill-after STEP` SIGKILLs the
process right after that step of the protocol (`protocol.STEPS`), as a crash of the machine would.

    python -m oabench_pipeline_tests.inference.batch_child API BASE_URL JOURNAL SINK N [--kill-after STEP]

Results are appended to SINK (JSON lines, one per result handed over, fsynced), as the response log
keeps them; the test reads it back keeping the first answer of each request hash.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
from pathlib import Path

from oabench_pipeline.inference.batches.journal import BatchJournal
from oabench_pipeline.inference.batches.protocol import BatchLineResult, BatchProtocol
from oabench_pipeline_tests.inference.batch_helpers import MODEL, questions, transport_for


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("api")
    parser.add_argument("base_url")
    parser.add_argument("journal", type=Path)
    parser.add_argument("sink", type=Path)
    parser.add_argument("n", type=int)
    parser.add_argument("--kill-after")
    args = parser.parse_args()

    def after_step(step: str) -> None:
        if step == args.kill_after:
            os.kill(os.getpid(), signal.SIGKILL)

    def keep(line: BatchLineResult) -> None:
        record = {
            "qid": line.result.qid,
            "request_hash": line.result.request_hash,
            "ok": line.result.ok,
            "batch_id": line.batch_id,
        }
        with args.sink.open("a") as handle:
            handle.write(json.dumps(record) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    transport = transport_for(args.api, args.base_url)
    protocol = BatchProtocol(BatchJournal(args.journal), transport, MODEL, after_step=after_step)
    report = protocol.run(questions(args.n), keep, poll_interval_s=0.01)
    print(json.dumps({"done": report.done}))


if __name__ == "__main__":
    main()
