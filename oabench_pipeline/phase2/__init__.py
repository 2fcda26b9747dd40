"""Dagster assets of the 2nd phase (prova prático-profissional), over `core/phase2/`."""
