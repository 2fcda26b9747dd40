"""`python -m oabench_pipeline.cli`: the same `oabench` command, for an environment without the console script."""

from oabench_pipeline.cli import main

main(prog_name="oabench")
