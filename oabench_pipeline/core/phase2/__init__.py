"""The 2nd phase (prova prático-profissional), pure: OAB-Bench's files parsed, judge scores read, area-exams
scored and ranked. No Dagster, no I/O beyond the arguments (docs/phase2.md)."""
