"""Scoring domain: per-question scores, leaderboard and analysis tables, and the reports people read."""
