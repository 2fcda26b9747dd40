"""How `oabench` runs Dagster: the instance, launching and following runs, Ctrl-C, what is up to date, and
where each cell stands."""
