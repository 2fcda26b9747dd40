"""Batch APIs that survive any crash and never pay twice (issue 43): the durable journal (`journal.py`),
the two transports (`openai.py`, `openrouter.py`, over `transport.py`) and the protocol (`protocol.py`).
No Dagster here; the design and what was verified of each API: docs/design/batch-apis.md."""
