"""Helpers imported INSIDE PySpark applications run by ``JrsSparkSubmitOperator``.

This subpackage must stay importable in a bare Spark driver: standard library and pyspark only
(pyspark imported lazily inside functions), never Airflow. On a cluster, ship ``airflow_jrs`` to the
driver (``py_files``/``--py-files`` with a zip of the package, or install it in the driver image);
locally the operator puts the repository root on ``PYTHONPATH``.

Note: ``import airflow_jrs.spark`` first runs ``airflow_jrs/__init__.py``, which imports the job
result store and therefore the ``redis`` client library (but not Airflow). The driver's Python
needs ``redis`` installed as well.

The one contract between an application and the operator is the commit marker written by
:func:`write_commit_marker` (see :mod:`airflow_jrs.spark.commit` for why it exists).
"""

from airflow_jrs.spark.commit import MARKER_NAME, job_context, read_commit_marker, write_commit_marker

__all__ = ["MARKER_NAME", "job_context", "read_commit_marker", "write_commit_marker"]
