"""Commit markers: the last file a Spark application writes (temporary lead version)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any


def job_context(spark: Any) -> dict[str, Any]:
    conf = spark.conf
    return {k: conf.get(f"spark.jrs.{k}", None) for k in ("job_id", "fence", "output_dir", "namespace")}


def write_commit_marker(spark: Any, output_dir: str, metrics: dict[str, Any]) -> None:
    ctx = job_context(spark)
    doc = {
        "v": 1,
        "application_id": spark.sparkContext.applicationId,
        "job_id": ctx["job_id"],
        "fence": ctx["fence"],
        "metrics": metrics,
        "written_at": datetime.now(timezone.utc).isoformat(),
    }
    jvm = spark._jvm
    path = jvm.org.apache.hadoop.fs.Path(f"{output_dir.rstrip('/')}/_JRS_COMMIT.json")
    fs = path.getFileSystem(spark._jsc.hadoopConfiguration())
    out = fs.create(path, True)
    try:
        out.write(bytearray(json.dumps(doc).encode()))
    finally:
        out.close()


def read_commit_marker(output_dir: str) -> dict[str, Any] | None:
    import fsspec

    fs, path = fsspec.core.url_to_fs(f"{output_dir.rstrip('/')}/_JRS_COMMIT.json")
    if not fs.exists(path):
        return None
    with fs.open(path, "r") as fh:
        text = fh.read()
    try:
        return dict(json.loads(text))
    except ValueError as exc:
        raise ValueError(f"commit marker {path!r} is not valid JSON ({exc})") from None
