"""Pure logic of the 2nd phase (prova prático-profissional): no Dagster, no I/O beyond the arguments."""
