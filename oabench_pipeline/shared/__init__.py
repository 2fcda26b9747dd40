"""What the asset domains (exams, inference, phase2, scoring, catalogue) share: partitions, the warehouse
resource and its raw file store, asset-check and metadata helpers, and the run tags a cell sets."""
