"""Answering: talking to OpenAI-compatible chat endpoints (retries, concurrency, secret redaction), the cells,
batches, spend, what is up to date (`freshness.py`) and Ctrl-C (`interrupts.py`)."""
