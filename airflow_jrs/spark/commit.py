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

The writer runs where the application's Python runs, with the standard library and pyspark only
(never Airflow):

* with a classic SparkSession that is the driver: it writes through the Hadoop FileSystem API of
  the running JVM, so the marker lands wherever Spark itself can write (local, HDFS, S3A, ABFS,
  GCS) with the same credentials and configuration as the data;
* with a Spark Connect session the driver is the remote server and the client has no JVM: the
  client writes the marker itself, after the write action returned (the data is complete then),
  to a path this process sees (local disk, NFS, a mount of the bucket) or through an ``opener``
  the caller supplies (``fsspec.open`` for ``s3://`` and the like). It also records the session
  id, which the Connect launcher reattaches to.

The reader runs on the Airflow side, where there is no JVM: it uses fsspec.

Marker document (``v`` is the format version; ``session_id`` only from a Connect session)::

    {"v": 1, "application_id": "local-1700000000000", "job_id": "...", "fence": 7,
     "metrics": {...}, "written_at": "2013-01-01T00:00:00+00:00", "session_id": "..."}
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from typing import IO, Any

from airflow_jrs.spark.conf import CONF_FENCE, CONF_JOB_ID, CONF_NAMESPACE, CONF_OUTPUT_DIR
from airflow_jrs.spark.errors import CorruptCommitMarkerError

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


#: Opens a URL for writing bytes (``opener(url, "wb")``), e.g. ``fsspec.open``: how a Spark Connect
#: client writes a marker to a scheme the standard library cannot write.
Opener = Callable[[str, str], Any]


def is_connect_session(spark: Any) -> bool:
    """Is ``spark`` a Spark Connect session (``pyspark.sql.connect``) rather than a classic one?

    Decided on the class's module, without importing ``pyspark.sql.connect`` (it needs grpc)."""
    return type(spark).__module__.startswith("pyspark.sql.connect.")


def write_commit_marker(
    spark: Any, output_dir: str, metrics: dict[str, Any], *, opener: Opener | None = None
) -> dict[str, Any]:
    """Write ``<output_dir>/_JRS_COMMIT.json`` and return its document. Call it LAST, after every
    byte of data is written.

    ``metrics`` must be JSON-serialisable (it becomes the job result's metrics). With a classic
    session the file goes through the driver JVM's Hadoop FileSystem for ``output_dir``
    (``fs.create(path, overwrite)``), so any scheme Spark can write works. With a Spark Connect
    session the client writes it (see the module docstring): a local path or ``file://`` URL
    directly, any other scheme only through ``opener``; a local marker appears atomically (a
    temporary file renamed over it), so a reader never sees half of one.
    """
    ctx = job_context(spark)
    connect = is_connect_session(spark)
    doc: dict[str, Any] = {
        "v": MARKER_VERSION,
        "application_id": spark.conf.get("spark.app.id", None) if connect else spark.sparkContext.applicationId,
        "job_id": ctx["job_id"],
        "fence": ctx["fence"],
        "metrics": metrics,
        "written_at": datetime.now(UTC).isoformat(),
    }
    if connect:
        doc["session_id"] = spark.session_id
    payload = json.dumps(doc, sort_keys=True).encode("utf-8")  # serialise before touching the FS
    if connect:
        _write_from_client(marker_path(output_dir), payload, opener)
        return doc
    jvm = spark._jvm
    path = jvm.org.apache.hadoop.fs.Path(marker_path(output_dir))
    fs = path.getFileSystem(spark._jsc.hadoopConfiguration())
    out = fs.create(path, True)
    try:
        out.write(bytearray(payload))
    finally:
        out.close()
    return doc


def check_client_marker_target(output_dir: str, opener: Opener | None) -> None:
    """Raise ``ValueError`` now if a Spark Connect client could not write ``output_dir``'s marker.

    :func:`~airflow_jrs.spark.output.commit_output` calls it BEFORE the data is written, so a
    misconfigured job fails without Spark work instead of after it."""
    if opener is not None:
        return
    scheme, sep, _ = marker_path(output_dir).partition("://")
    if sep and scheme != "file":
        raise ValueError(
            f"cannot write the commit marker of {output_dir} from a Spark Connect client: the standard "
            f"library writes only local paths, and {scheme}:// is not one. Pass opener=fsspec.open (or "
            "any callable opening a URL for 'wb'), or write the output to a filesystem mounted here."
        )


def _write_from_client(url: str, payload: bytes, opener: Opener | None) -> None:
    """A Connect client's marker write: ``opener`` when given, else a local file, atomically."""
    if opener is not None:
        with opener(url, "wb") as fh:
            fh.write(payload)
        return
    check_client_marker_target(url.rsplit("/", 1)[0], opener)
    _, sep, rest = url.partition("://")
    path = rest if sep else url
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        raise FileNotFoundError(
            f"cannot write the commit marker {path}: its folder {folder} does not exist on this client. "
            "With Spark Connect the server writes the data and the client the marker: the output folder "
            "must be on a filesystem both see at the same path (shared disk, NFS, a mounted bucket)."
        )
    fd, tmp = tempfile.mkstemp(prefix=".jrs-commit-", dir=folder)
    out: IO[bytes]
    with os.fdopen(fd, "wb") as out:
        out.write(payload)
        out.flush()
        os.fsync(out.fileno())
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


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
