"""Helpers imported INSIDE PySpark applications run by ``JrsSparkSubmitOperator``.

This subpackage must stay importable in a bare Spark driver: standard library and pyspark only
(pyspark imported lazily inside functions), never Airflow. The driver's Python must be able to
import ``airflow_jrs``: install the package there (``pip install airflow-jrs`` in the driver's
environment or image; in local and client mode the driver is the worker's Python, where the
provider is installed already), or ship a zip of the package with ``py_files``/``--py-files``.

``import airflow_jrs.spark`` runs ``airflow_jrs/__init__.py`` first, which imports the store,
the lease and Airflow's classes lazily: the driver's Python needs neither ``redis`` nor
``psutil`` nor Airflow. What the driver shares with the rest (the fence and the file names it
gives, the commit-marker error) is defined in this subpackage and imported from here by the
rest, never the other way round (the project's architecture test holds it).

The one contract between an application and the operator is the commit marker written by
:func:`write_commit_marker` (see :mod:`airflow_jrs.spark.commit` for why it exists);
:func:`commit_output` writes a DataFrame and then the marker, with a classic or a Spark Connect
session.
"""

from airflow_jrs.spark.commit import (
    MARKER_NAME,
    is_connect_session,
    job_context,
    read_commit_marker,
    write_commit_marker,
)
from airflow_jrs.spark.output import commit_output
from airflow_jrs.spark.streaming import StreamingJob, StreamOutcome, streaming_job

__all__ = [
    "MARKER_NAME",
    "StreamOutcome",
    "StreamingJob",
    "commit_output",
    "is_connect_session",
    "job_context",
    "read_commit_marker",
    "streaming_job",
    "write_commit_marker",
]
