"""The static OABench site: pages from the warehouse tables (`build.py`), their paths (`paths.py`), words
(`labels.py`), data (`data.py`), the SQL behind each figure (`recompute.py`) and the writer that touches
only changed files (`writer.py`). No Dagster: the `leaderboard_site` asset and `oabench site` call
`build_site`."""

from oabench_pipeline.core.site.build import SITE_VERSION, SiteOptions, SiteResult, build_site

__all__ = ["SITE_VERSION", "SiteOptions", "SiteResult", "build_site"]
