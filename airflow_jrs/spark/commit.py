"""Commit markers: the last file a Spark application writes, proof that its output is complete.

A Spark application guarded by the job result store writes its data into a staging folder and
then, LAST, ``<output_dir>/_JRS_COMMIT.json``. The marker exists for two readers:

* a later attempt of the same job. When an attempt dies after submitting (worker killed, pod
  evicted), its successor finds the intent it left and looks for the marker: a marker means the
  application finished and its output is complete, so the successor adopts that output instead of
  computing it again; no marker means the output may be partial, so it must be recomputed. The
  marker also records the job id and fence (lease token) of the attempt that wrote it.
* the operator after a normal run. In local and client mode ``spark-submit`` never reports the
  application id; the marker carries ``spark.sparkContext.applicationId`` (``local-...``,
  ``application_...``, ``spark-...``) and the application's own metrics into the job result.

The writer runs inside the PySpark driver: it uses only the standard library and pyspark (imported
lazily; never Airflow) and writes through the Hadoop FileSystem API of the running JVM, so the
marker lands wherever Spark itself can write (local, HDFS, S3A, ABFS, GCS) with the same
credentials and configuration as the data. The reader runs on the Airflow side, where there is no
JVM: it uses fsspec.

Marker document (``v`` is the format version)::

    {"v": 1, "application_id": "local-1700000000000", "job_id": "...", "fence": 7,
     "metrics": {...}, "written_at": "2013-01-01T00:00:00+00:00"}
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from airflow_jrs.exceptions import CorruptCommitMarkerError
from airflow_jrs.spark.conf import CONF_FENCE, CONF_JOB_ID, CONF_NAMESPACE, CONF_OUTPUT_DIR

MARKER_NAME = "_JRS_COMMIT.json"
MARKER_VERSION = 1


def marker_path(output_dir: str) -> str:
    """``<output_dir>/_JRS_COMMIT.json`` (works for plain paths and URLs alike)."""
    return f"{output_dir.rstrip('/')}/{MARKER_NAME}"


def job_context(spark: Any) -> dict[str, Any]:
    """What the operator told this application about itself, from Spark conf.

    Returns ``{"job_id", "fence", "output_dir", "namespace"}``; a key whose conf entry is absent (the
    application was submitted by hand, not by the operator) is ``None``. ``fence`` is an ``int`` when
    the conf value is an integer (it always is when the operator sets it), else the raw string.
    """
    conf = spark.conf

    def get(key: str) -> str | None:
        value = conf.get(key, None)
        return None if value is None else str(value)

    fence: int | str | None = get(CONF_FENCE)
    if isinstance(fence, str):
        try:
            fence = int(fence)
        except ValueError:
            pass
    return {
        "job_id": get(CONF_JOB_ID),
        "fence": fence,
        "output_dir": get(CONF_OUTPUT_DIR),
        "namespace": get(CONF_NAMESPACE),
    }


def write_commit_marker(spark: Any, output_dir: str, metrics: dict[str, Any]) -> None:
    """Write ``<output_dir>/_JRS_COMMIT.json``. Call it LAST, after every byte of data is written.

    ``metrics`` must be JSON-serialisable (it becomes the job result's metrics). The file goes
    through the driver JVM's Hadoop FileSystem for ``output_dir`` (``fs.create(path, overwrite)``),
    so any scheme Spark can write works and no Python filesystem library is needed on the cluster.
    """
    ctx = job_context(spark)
    doc = {
        "v": MARKER_VERSION,
        "application_id": spark.sparkContext.applicationId,
        "job_id": ctx["job_id"],
        "fence": ctx["fence"],
        "metrics": metrics,
        "written_at": datetime.now(UTC).isoformat(),
    }
    payload = json.dumps(doc, sort_keys=True).encode("utf-8")  # serialise before touching the FS
    jvm = spark._jvm
    path = jvm.org.apache.hadoop.fs.Path(marker_path(output_dir))
    fs = path.getFileSystem(spark._jsc.hadoopConfiguration())
    out = fs.create(path, True)
    try:
        out.write(bytearray(payload))
    finally:
        out.close()


def read_commit_marker(output_dir: str) -> dict[str, Any] | None:
    """The parsed marker in ``output_dir`` (Airflow side), or ``None`` when there is none.

    ``output_dir`` is a local path or any fsspec URL (``s3://``, ``hdfs://``, ...). A missing folder
    counts as no marker. Raises :class:`~airflow_jrs.exceptions.CorruptCommitMarkerError` (a
    ``ValueError``) naming the file when it is not a JSON object: a marker that exists but cannot be
    read is an anomaly to look at, not a reason to recompute silently.
    """
    import fsspec

    url = marker_path(output_dir)
    fs, path = fsspec.core.url_to_fs(url)
    try:
        with fs.open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        return None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are both ValueErrors
        raise CorruptCommitMarkerError(
            f"commit marker {url} is not valid JSON: {exc}; its output is not trusted (recomputed)", path=url
        ) from None
    if not isinstance(doc, dict):
        raise CorruptCommitMarkerError(
            f"commit marker {url} is not a JSON object (got {type(doc).__name__}); its output is not trusted",
            path=url,
        )
    return doc
