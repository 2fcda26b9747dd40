"""The 2nd phase (prova prático-profissional): OAB-Bench's answer and judge protocols, pure (docs/phase2.md)."""
