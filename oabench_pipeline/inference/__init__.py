"""Talking to OpenAI-compatible chat endpoints: retries, concurrency and secret redaction."""
