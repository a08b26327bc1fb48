"""Write a job's DataFrame to its fenced output folder and commit it: data first, marker LAST.

One call for what every guarded application does at its end, the same with a classic
SparkSession (spark-submit, ``@task.pyspark`` in the worker) and a Spark Connect session:

    from airflow_jrs.spark import commit_output

    commit_output(df, metrics={"rows": n})      # folder from the attempt's conf (spark.jrs.output_dir)

The order is the contract. The write action returns only once every task's output is committed
by Spark's output committer (on a Connect session: once the server finished the action and
answered the client), so a marker written after it can only sit beside complete data. An attempt
killed before the marker leaves a folder without one, which recovery never adopts. The marker
names the job and fence from the session's ``spark.jrs.*`` conf (see :mod:`airflow_jrs.spark.commit`).

Standard library and pyspark only (pyspark is reached through the DataFrame; nothing imported).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from airflow_jrs.spark.commit import (
    Opener,
    check_client_marker_target,
    is_connect_session,
    job_context,
    write_commit_marker,
)

#: Where the data goes inside the output folder, beside the marker (``<output>/data``).
DATA_SUBDIR = "data"


def data_path(output_dir: str, subdir: str = DATA_SUBDIR) -> str:
    """``<output_dir>/<subdir>``: the folder :func:`commit_output` writes the DataFrame to."""
    return f"{output_dir.rstrip('/')}/{subdir.strip('/')}"


def commit_output(
    df: Any,
    output_dir: str | None = None,
    *,
    metrics: Mapping[str, Any] | None = None,
    format: str = "parquet",
    mode: str = "overwrite",
    subdir: str = DATA_SUBDIR,
    options: Mapping[str, str] | None = None,
    partition_by: list[str] | None = None,
    opener: Opener | None = None,
) -> dict[str, Any]:
    """Write ``df`` to ``<output_dir>/<subdir>`` and then the commit marker; return the marker.

    ``output_dir`` defaults to the attempt's fenced folder (``spark.jrs.output_dir`` in the
    session's conf, set by the operator or launcher). ``format``, ``mode``, ``options`` and
    ``partition_by`` go to ``df.write`` unchanged. ``metrics`` (JSON-serialisable, small) become
    the job result's metrics; nothing is counted here, as counting would run the job twice.
    ``opener`` is for a Spark Connect client writing the marker to a non-local URL
    (``fsspec.open``); see :func:`~airflow_jrs.spark.commit.write_commit_marker`.

    Raises ``ValueError`` before any Spark work when there is no output folder to write to, or
    when a Spark Connect client could not write its marker (a non-local URL without ``opener``).
    """
    spark = df.sparkSession
    if output_dir is None:
        output_dir = job_context(spark)["output_dir"]
        if not output_dir:
            raise ValueError(
                "commit_output: no output folder. Pass output_dir=..., or run the application through "
                "the airflow-jrs operator or launcher, which sets spark.jrs.output_dir to the attempt's "
                "fenced folder."
            )
    if is_connect_session(spark):
        check_client_marker_target(output_dir, opener)
    writer = df.write.format(format).mode(mode)
    if options:
        writer = writer.options(**options)
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    path = data_path(output_dir, subdir)
    writer.save(path)
    if is_connect_session(spark) and opener is None:
        _check_client_sees(path)
    return write_commit_marker(spark, output_dir, dict(metrics or {}), opener=opener)


def _check_client_sees(path: str) -> None:
    """A Connect client must see the folder the server just wrote, or its marker would vouch for
    data it cannot know is there (the two would not share a filesystem)."""
    local = path[len("file://") :] if path.startswith("file://") else path
    if not os.path.isdir(local):
        raise FileNotFoundError(
            f"the Spark Connect server wrote {path}, but this client does not see it: no commit marker "
            "was written. The output folder must be on a filesystem the server and the client share at "
            "the same path (shared disk, NFS, a mounted bucket), or pass opener= with a URL both reach."
        )
