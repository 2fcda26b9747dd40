"""The named fault profiles of the reliability checks, shared by `test_faults.py` and `benchmarks/reliability.py`.

Random faults are capped per prompt (`max_faults_per_prompt`) so that the client's retry budgets (6 transient,
2 malformed retries) always end in an answer within one run; `errors_then_cleared` deliberately exceeds the
malformed budget so that some questions end the first run as error rows, which a rerun must clear.
"""

from __future__ import annotations

from oabench_pipeline_tests.servers.openai_replay import FaultProfile

# A client timeout the hangs outlast: a hung request is abandoned after this many seconds and retried.
# Short, so that the suite does not sleep through hangs, yet 20× the storm's replay latency: a loaded
# machine's slow answer must not look like a hang (a spurious timeout spends the transient retry budget,
# and pays for the answer the server sent twice). Each cell answers in a process of its own, which on two
# busy cores can be descheduled for a few hundred milliseconds.
CLIENT_TIMEOUT_S = 1.0
HANG_S = 1.6
# The 429 storm answers 429 (Retry-After: 0.2) to whatever is in flight beyond this many requests; the
# client honours a fractional Retry-After as it does a whole one (`parse_retry_after`). A fifth of the
# second a real gateway asks for, yet long enough for the storm to calm before the retries come back.
STORM_LIMIT = 8
STORM_RETRY_AFTER_S = 0.2
# Concurrency of the runs under a storm: well above the limit, so the storm really happens.
STORM_CONCURRENCY = 16
# Latency of the replayed answers under a storm: long enough that 16 requests are really in flight at
# once whatever the client's CPU per request (with 5 ms answers a client needing ~1 ms of CPU per
# request on a loaded machine never has more than ~8 in flight, and the storm would not happen).
STORM_LATENCY_S = 0.05

PROFILES: dict[str, FaultProfile] = {
    "none": FaultProfile(),
    "5xx_10pct": FaultProfile(seed=1, rate_5xx=0.10, max_faults_per_prompt=2),
    "429_storm": FaultProfile(
        seed=2, max_in_flight_before_429=STORM_LIMIT, retry_after_s=STORM_RETRY_AFTER_S
    ),
    "hang_5pct": FaultProfile(seed=3, rate_hang=0.05, hang_s=HANG_S, max_faults_per_prompt=2),
    "malformed_json_5pct": FaultProfile(seed=4, rate_malformed_json=0.05, max_faults_per_prompt=2),
    "drop_5pct": FaultProfile(seed=5, rate_drop=0.05, max_faults_per_prompt=2),
    "combined": FaultProfile(
        seed=6,
        rate_5xx=0.10,
        rate_hang=0.05,
        hang_s=HANG_S,
        rate_malformed_json=0.05,
        rate_drop=0.05,
        max_in_flight_before_429=STORM_LIMIT,
        retry_after_s=STORM_RETRY_AFTER_S,
        max_faults_per_prompt=2,
    ),
}

# Three malformed bodies in a row exhaust the malformed budget (1 try + 2 retries): an error row. The cap
# of 3 faults per prompt then lets the rerun's first attempt through.
ERRORS_THEN_CLEARED = FaultProfile(seed=7, rate_malformed_json=0.6, max_faults_per_prompt=3)


def concurrency_for(profile: FaultProfile) -> int:
    """The `--concurrency` to run a profile with: above the storm limit when there is one."""
    return STORM_CONCURRENCY if profile.max_in_flight_before_429 is not None else 8


def latency_for(profile: FaultProfile, latency_s: float) -> float:
    """The replay latency to run a profile with: at least `STORM_LATENCY_S` under a storm."""
    return max(latency_s, STORM_LATENCY_S) if profile.max_in_flight_before_429 is not None else latency_s
