"""The leaderboard's analyses, one module per thing computed; `core/leaderboard.py` assembles them.

- `aggregates`: key × edition and key sums (scores, latency, tokens, cost and where it comes from);
- `intervals`: Wilson intervals of accuracy and the exact probability of passing;
- `pairwise`: exact McNemar with Holm, rank intervals and the compact letter display (`tie_group`);
- `items`: per-question difficulty, discrimination and possible answer-key problems;
- `providers`, `edition_deltas`, `pareto`, `latency`, `contamination`: the small derived tables;
- `run_variance`: how replicates of one key differ.
"""
