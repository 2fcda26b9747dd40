"""HTTP statuses shared by both HTTP clients (the official PDF downloads and the model client)."""

from __future__ import annotations

# Statuses that mean "the same request may well succeed later": a timeout or conflict on the server's
# side (408, 409, 425), rate limiting (429), a gateway or upstream failure (5xx), and the 52x statuses
# Cloudflare puts in front of many providers and official hosts.
TRANSIENT_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 521, 522, 523, 524, 529})
