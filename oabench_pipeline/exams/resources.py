"""The exam sources' resource: the editions registry and where official PDFs are fetched from."""

from __future__ import annotations

from pathlib import Path

from dagster import ConfigurableResource

from oabench_pipeline.core.editions import Edition, Suite, known_editions, load_suites
from oabench_pipeline.exams.downloads import DownloadPolicy, PdfDownloader
from oabench_pipeline.shared.raw_store import RawStore


class ExamSourcesResource(ConfigurableResource):
    """The editions registry and where official PDFs are fetched from (the official host or a mirror)."""

    editions_file: str
    discovered_file: str | None = None
    source_base_url: str | None = None
    download_timeout_s: float = DownloadPolicy.deadline_s

    def editions(self) -> dict[str, Edition]:
        """The registry's editions, plus those the portal sensor discovered (a registry entry wins)."""
        return known_editions(
            Path(self.editions_file), Path(self.discovered_file) if self.discovered_file else None
        )

    def suites(self) -> dict[str, Suite]:
        """Every suite of the registry, then `all` (the registry's editions plus the discovered ones)."""
        return load_suites(
            Path(self.editions_file), Path(self.discovered_file) if self.discovered_file else None
        )

    def edition(self, partition_key: str) -> Edition:
        editions = self.editions()
        if partition_key not in editions:
            raise KeyError(f"edition {partition_key!r} is not in the editions registry {self.editions_file}")
        return editions[partition_key]

    def downloader(self, store: RawStore) -> PdfDownloader:
        return PdfDownloader(
            store,
            base_override=self.source_base_url,
            policy=DownloadPolicy(deadline_s=self.download_timeout_s),
        )
