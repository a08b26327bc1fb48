"""What an application or driver id looks like, so that only ids are ever stored.

What a launcher parsed from spark-submit's output, or what an application wrote in its commit
marker, ends up in the intent and the result, where a successor looks the application up by
it: anything that is not an id (a reattach path, a log line) must never get there.
"""

from __future__ import annotations

import re

#: What an application or driver id looks like, per deploy mode (validated before it is stored).
_IDS = {
    "local": re.compile(r"local-\d{10,}"),
    "standalone": re.compile(r"(driver-\d{14}-\d{4,}|app-\d{14}-\d{4,})"),
    "yarn": re.compile(r"application_\d+_\d+"),
    "kubernetes": re.compile(r"(spark-[0-9a-f]{32}|[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?-driver)"),
}


def application_id_of(kind: str, value: object) -> str | None:
    """``value`` if it has the shape of an application or driver id of a ``kind`` target, else ``None``.

    What the provider's hook parsed from spark-submit's output, or what an application wrote in
    its commit marker, is stored only when it is an id (``driver-...``, ``app-...``,
    ``application_...``, ``local-...``, a Kubernetes driver): a reattach path or a log line must
    never put something else (``namespace:pod``, a message) in the intent or the result."""
    if not isinstance(value, str):
        return None
    patterns = [_IDS[kind]] if kind in _IDS else list(_IDS.values())
    if kind == "standalone":  # local[...] masters never reach here, but a client driver says local-...
        patterns.append(_IDS["local"])
    return value if any(p.fullmatch(value) for p in patterns) else None
