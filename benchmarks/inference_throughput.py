"""How close the model client gets to ideal throughput against the loopback replay server.

For each (concurrency C, latency L): N = 238 distinct prompts (one OAB run), ideal = ceil(N / C) * L,
efficiency = ideal / (first request sent -> last response received, measured by the client).
Target: >= 0.98 at (C=20, L=200 ms), the shape of a real run (20 in flight, answers in 1-60 s, so
200 ms is already a harsh case). The former C=64/L=50 ms target measured the client's CPU per
request on loopback, which real endpoints never make visible; the client is httpx since.

By default the server runs in a separate process, as a real provider would: in-process it would
share the GIL with the client and the figure would measure both. `--in-process` runs it in a thread.

The client runs on `run_blocking`'s loop (asyncio's), through one shared `httpx.AsyncClient`, as the
pipeline does. The last line runs a real cell twice (plan from the response log, send what is
pending) and checks that the rerun sends 0 requests, counted by the server.

    .venv/bin/python benchmarks/inference_throughput.py [--in-process] [--repeat 5] [--baseline]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from oabench_pipeline.inference.client import run_blocking, run_chat_requests  # noqa: E402
from oabench_pipeline.inference.types import ChatRequest, ChatResult, EndpointConfig, RunStats  # noqa: E402
from oabench_pipeline_tests.servers.openai_replay import STATS_PATH, ReplayServer  # noqa: E402

N_REQUESTS = 238
SCENARIOS: tuple[tuple[int, float, float], ...] = ((20, 0.200, 0.98),)
MODEL = "bench/replay-model"


@dataclass(frozen=True)
class Measurement:
    concurrency: int
    latency_s: float
    target: float
    elapsed_s: float
    answered: int
    sent: int
    server_max_in_flight: int
    server_duplicates: int
    connections_opened: int  # by the client: keep-alive means one per worker, not one per request

    @property
    def ideal_s(self) -> float:
        return math.ceil(N_REQUESTS / self.concurrency) * self.latency_s

    @property
    def efficiency(self) -> float:
        return self.ideal_s / self.elapsed_s if self.elapsed_s else 0.0


def synthetic_requests(n: int) -> list[ChatRequest]:
    """Distinct prompts, so the server's per-prompt counters can spot a duplicate paid call."""
    return [
        ChatRequest(
            qid=f"bench-q{i}",
            body={"model": MODEL, "messages": [{"role": "user", "content": f"Questão sintética {i}"}]},
            request_hash=f"h{i}",
        )
        for i in range(n)
    ]


@contextmanager
def server_in_subprocess(latency_s: float) -> Iterator[tuple[str, Callable[[], dict]]]:
    """A replay server in its own interpreter; yields its base URL and a stats fetcher."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "oabench_pipeline_tests.servers.openai_replay", "--latency-s", str(latency_s)],
        cwd=REPO_ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        root = base_url.removesuffix("/v1")

        own_connections = 0

        def stats() -> dict:
            nonlocal own_connections
            own_connections += 1  # each stats request opens a connection of its own: not the client's
            with urllib.request.urlopen(root + STATS_PATH, timeout=10) as response:
                counters = json.load(response)
            counters["connections_opened"] -= own_connections
            return counters

        yield base_url, stats
    finally:
        assert proc.stdin is not None
        proc.stdin.close()  # the server exits when stdin closes
        proc.wait(timeout=10)


@contextmanager
def server_in_thread(latency_s: float) -> Iterator[tuple[str, Callable[[], dict]]]:
    with ReplayServer(latency_s=latency_s) as server:
        yield server.base_url, lambda: server.stats.to_json()


RESPONSE_LOG_MODES = ("none", "inline-fsync", "log")


def run_once(
    base_url: str, concurrency: int, runner: Callable, response_log: str = "none", log_dir: str | None = None
) -> RunStats:
    """One pass; `response_log` says where each result goes: a list (`none`), a file written and fsynced
    on the event loop (`inline-fsync`, what an fsync per answer would cost there), or the pipeline's
    `ResponseLog` (`log`: written at once, fsynced on its syncing thread)."""
    endpoint = EndpointConfig(base_url=base_url, api_key="bench-key")
    requests = synthetic_requests(N_REQUESTS)
    if response_log == "none":
        results: list[ChatResult] = []
        return runner(run_chat_requests(endpoint, requests, concurrency, results.append))
    from oabench_pipeline.inference.response_log import ResponseLog

    with tempfile.TemporaryDirectory(dir=log_dir) as tmp:
        path = Path(tmp) / "cell.jsonl"
        if response_log == "log":
            with ResponseLog(path) as log:
                return runner(run_chat_requests(endpoint, requests, concurrency, log.append))
        with path.open("a", encoding="utf-8") as handle:

            def append_and_fsync(result: ChatResult) -> None:
                handle.write(json.dumps(dataclasses.asdict(result), default=str) + "\n")
                handle.flush()
                os.fsync(handle.fileno())

            return runner(run_chat_requests(endpoint, requests, concurrency, append_and_fsync))


def measure(
    concurrency: int,
    latency_s: float,
    target: float,
    in_process: bool,
    runner: Callable,
    response_log: str = "none",
    log_dir: str | None = None,
) -> Measurement:
    serve = server_in_thread if in_process else server_in_subprocess
    with serve(latency_s) as (base_url, stats):
        run = run_once(base_url, concurrency, runner, response_log, log_dir)
        server = stats()
    return Measurement(
        concurrency=concurrency,
        latency_s=latency_s,
        target=target,
        elapsed_s=run.elapsed_s,
        answered=run.answered,
        sent=run.sent_requests,
        server_max_in_flight=server["max_in_flight"],
        server_duplicates=server["duplicate_answers"],
        connections_opened=server["connections_opened"],
    )


async def raw_socket_client(base_url: str, concurrency: int) -> float:
    """Reference ceiling: a bare asyncio HTTP/1.1 client (no httpx, no retries) against the same server.

    Returns its elapsed time; the gap between this and our client is the client's own overhead, the
    gap between this and the ideal is what the machine (and the server) cost.
    """
    url = httpx_free_split(base_url)
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(N_REQUESTS):
        queue.put_nowait(i)

    async def worker() -> None:
        reader, writer = await asyncio.open_connection(url[0], url[1])
        while not queue.empty():
            i = queue.get_nowait()
            body = json.dumps(synthetic_requests(1)[0].body | {"n": i}).encode()
            head = (
                f"POST {url[2]}/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
            )
            writer.write(head.encode() + body)
            length = 0
            while (line := await reader.readline()) != b"\r\n":
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            await reader.readexactly(length)
        writer.close()

    loop = asyncio.get_running_loop()
    started = loop.time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return loop.time() - started


def httpx_free_split(base_url: str) -> tuple[str, int, str]:
    """(host, port, path prefix) of an http:// base URL."""
    rest = base_url.removeprefix("http://")
    hostport, _, path = rest.partition("/")
    host, _, port = hostport.partition(":")
    return host, int(port), "/" + path


def report(m: Measurement) -> str:
    verdict = "OK " if m.efficiency >= m.target else "LOW"
    return (
        f"{verdict} C={m.concurrency:>3} L={m.latency_s * 1000:>4.0f} ms  N={N_REQUESTS}  "
        f"ideal={m.ideal_s:.3f}s  elapsed={m.elapsed_s:.3f}s  efficiency={m.efficiency:.3f} "
        f"(target {m.target:.2f})  answered={m.answered} sent={m.sent} "
        f"server max in flight={m.server_max_in_flight} duplicate answers={m.server_duplicates} "
        f"connections opened={m.connections_opened}"
    )


def noop_rerun_line(runner: Callable = run_blocking) -> str:
    """Run one real cell twice against a fresh server, the way the inference asset does.

    Each pass plans the cell from its response log (`plan_cell`: only requests without a logged answer
    are pending), sends the pending ones and appends every result to the log. The second pass must
    find nothing pending and the server must count 0 new requests.
    """
    import polars as pl

    from oabench_pipeline.core.models_registry import ModelConfig
    from oabench_pipeline.inference.cell import plan_cell
    from oabench_pipeline.inference.response_log import (
        ResponseLog,
        cell_log_path,
        latest_by_hash,
        read_log,
    )

    questions = pl.DataFrame(
        {
            "qid": [f"bench-q{i}" for i in range(N_REQUESTS)],
            "number": list(range(1, N_REQUESTS + 1)),
            "status": ["active"] * N_REQUESTS,
            "stem": [f"Questão sintética {i}: qual alternativa?" for i in range(N_REQUESTS)],
            **{f"choice_{c}": [f"alternativa {c}"] * N_REQUESTS for c in "abcd"},
        }
    )
    with server_in_subprocess(0.005) as (base_url, stats), tempfile.TemporaryDirectory() as tmp:
        model = ModelConfig(id=MODEL, base_url=base_url)
        endpoint = EndpointConfig(base_url=base_url, api_key="bench-key")
        log_path = cell_log_path(Path(tmp) / "responses", model.key, "bench")
        sent_by_pass: list[tuple[int, int, int]] = []  # (pending, client-sent, server-counted)
        for _ in range(2):
            before = stats()["total_requests"]
            plan = plan_cell(model, questions, latest_by_hash(read_log(log_path)), pl.DataFrame())
            with ResponseLog(log_path) as log:
                run = runner(run_chat_requests(endpoint, plan.pending, 20, log.append))
            sent_by_pass.append((len(plan.pending), run.sent_requests, stats()["total_requests"] - before))
    (first_pending, first_sent, _), (pending, sent, counted) = sent_by_pass
    verdict = "OK " if pending == sent == counted == 0 and first_sent == first_pending else "BAD"
    return (
        f"{verdict} no-op rerun: {sent} requests sent ({pending} pending, server counted {counted} new); "
        f"first pass sent {first_sent} for {first_pending} pending questions"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--in-process", action="store_true", help="run the server in a thread of this process"
    )
    parser.add_argument("--repeat", type=int, default=5, help="runs per scenario; the best one is judged")
    parser.add_argument("--baseline", action="store_true", help="also time a bare asyncio socket client")
    parser.add_argument(
        "--response-log",
        choices=RESPONSE_LOG_MODES,
        default="log",
        help="where results go: the pipeline's ResponseLog (default), fsync on the loop, or nowhere",
    )
    parser.add_argument(
        "--log-dir", help="folder for the response log (default: the temp dir; /tmp may be a RAM disk)"
    )
    parser.add_argument("--only", help="run only the scenario with this concurrency (e.g. 20)")
    args = parser.parse_args(argv)
    runner: Callable = run_blocking
    below = 0
    for concurrency, latency_s, target in SCENARIOS:
        if args.only and str(concurrency) != args.only:
            continue
        runs = [
            measure(concurrency, latency_s, target, args.in_process, runner, args.response_log, args.log_dir)
            for _ in range(args.repeat)
        ]
        for m in runs:
            print(report(m), flush=True)
        if args.baseline:
            with server_in_subprocess(latency_s) as (base_url, _stats):
                elapsed = runner(raw_socket_client(base_url, concurrency))
            ideal = math.ceil(N_REQUESTS / concurrency) * latency_s
            print(f"    baseline bare-socket client: elapsed={elapsed:.3f}s efficiency={ideal / elapsed:.3f}")
        best = max(runs, key=lambda m: m.efficiency)
        median = statistics.median(m.efficiency for m in runs)
        print(
            f"    C={concurrency} L={latency_s * 1000:.0f} ms: best {best.efficiency:.3f}, median {median:.3f} "
            f"of {len(runs)} runs (load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs)",
            flush=True,
        )
        below += best.efficiency < target
    line = noop_rerun_line(runner)
    print(line)
    return 1 if below or not line.startswith("OK") else 0


if __name__ == "__main__":
    raise SystemExit(main())
