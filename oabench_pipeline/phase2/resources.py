"""Where the phase-2 sources registry is and where its files are fetched from."""

from __future__ import annotations

from pathlib import Path

from dagster import ConfigurableResource

from oabench_pipeline.core.phase2.sources import DEFAULT_PHASE2_FILE, Phase2Sources, load_phase2_sources
from oabench_pipeline.exams.downloads import DownloadPolicy, PdfDownloader
from oabench_pipeline.shared.raw_store import RawStore


class Phase2SourcesResource(ConfigurableResource):
    """`registry/phase2.toml` and the base URL (or mirror folder) replacing its URLs' scheme and host."""

    sources_file: str = str(DEFAULT_PHASE2_FILE)
    source_base_url: str | None = None
    download_timeout_s: float = DownloadPolicy.deadline_s

    def sources(self) -> Phase2Sources:
        return load_phase2_sources(Path(self.sources_file))

    def downloader(self, store: RawStore) -> PdfDownloader:
        return PdfDownloader(
            store,
            base_override=self.source_base_url,
            policy=DownloadPolicy(deadline_s=self.download_timeout_s),
        )
