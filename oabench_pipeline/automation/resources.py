"""The portal resource: where the OAB exam portal is, and how patiently and how often to ask it."""

from __future__ import annotations

from dagster import ConfigurableResource

from oabench_pipeline.automation.discovery import DEFAULT_PORTAL_URL, PortalPolicy


class PortalResource(ConfigurableResource):
    """The OAB exam portal watched for new editions (`OABENCH_PORTAL_URL` overrides the official one)."""

    base_url: str = DEFAULT_PORTAL_URL
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 30.0
    # The portal changes a few times a year: checking four times a day finds a definitive key within
    # hours of its publication without hammering a public site.
    check_interval_hours: float = 6.0

    def policy(self) -> PortalPolicy:
        return PortalPolicy(connect_timeout_s=self.connect_timeout_s, read_timeout_s=self.read_timeout_s)
