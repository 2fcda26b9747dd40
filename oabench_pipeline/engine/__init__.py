"""How `oabench` runs Dagster: the instance, launching and following runs, and where each cell stands.

What is up to date and the Ctrl-C flag belong to the senders, below: `inference/freshness.py`,
`inference/interrupts.py`.
"""
