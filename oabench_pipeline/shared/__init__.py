"""What the asset domains (exams, inference, scoring, automation) share: partitions, resources, asset-check
and metadata helpers, and the warehouse tables' column contracts."""
