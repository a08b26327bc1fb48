"""PySpark Structured Streaming application: delays per carrier, hour by hour, as files land.

    spark-submit carrier_delays_stream.py --landing /data/stream-landing [--available-now]

Input: CSV files dropped into ``--landing`` (one per hour of flights; columns ``year, month, day,
hour, carrier, dep_delay, arr_delay, flight, origin``; see ``jrs_testbench.streams``), read one
file per micro-batch. Each micro-batch is aggregated per (scheduled hour, carrier): ``flights``,
``cancelled`` (no ``dep_delay``), ``avg_dep_delay``, ``avg_arr_delay``, ``max_dep_delay``.

Output: ``<job output>/batches/batch_id=<N>/`` (Parquet), written by ``foreachBatch`` keyed by
the batch id with overwrite: a batch replayed after a cancel rewrites its own folder, so every
input row is counted exactly once. Read the whole folder to get every hour.

The job context (checkpoint, output, stop/cancel requests) comes from
:func:`airflow_jrs.spark.streaming_job`: submit it with ``JrsSparkSubmitOperator(streaming=True)``.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, IntegerType, StringType, StructField, StructType

from airflow_jrs.spark import streaming_job

if __package__:  # imported as flights.apps.carrier_delays_stream (dags/flights_pyspark.py)
    from .shared import app_arguments
else:  # run by spark-submit as a file: its own folder is first on sys.path
    from shared import app_arguments

SCHEMA = StructType(
    [
        StructField("year", IntegerType()),
        StructField("month", IntegerType()),
        StructField("day", IntegerType()),
        StructField("hour", IntegerType()),
        StructField("carrier", StringType()),
        StructField("dep_delay", DoubleType()),
        StructField("arr_delay", DoubleType()),
        StructField("flight", IntegerType()),
        StructField("origin", StringType()),
    ]
)


def main() -> None:
    parser = app_arguments(
        "Delays per carrier and scheduled hour, from the hourly CSV files that land.",
        landing="folder the hourly flights CSV files land in",
    )
    parser.add_argument("--available-now", action="store_true", help="process what is there, then finish")
    parser.add_argument("--trigger-seconds", type=float, default=10.0)
    args = parser.parse_args()

    spark = SparkSession.builder.appName("flights-carrier-delays-stream").getOrCreate()
    job = streaming_job(spark)
    batches = f"{job.output_dir.rstrip('/')}/batches"

    def write_batch(df: DataFrame, batch_id: int) -> None:
        per_carrier = df.groupBy("year", "month", "day", "hour", "carrier").agg(
            F.count(F.lit(1)).alias("flights"),
            F.sum(F.when(F.col("dep_delay").isNull(), 1).otherwise(0)).alias("cancelled"),
            F.avg("dep_delay").alias("avg_dep_delay"),
            F.avg("arr_delay").alias("avg_arr_delay"),
            F.max("dep_delay").alias("max_dep_delay"),
        )
        # keyed by batch id, overwritten: idempotent when Spark replays the batch after a cancel
        per_carrier.coalesce(1).write.mode("overwrite").parquet(f"{batches}/batch_id={batch_id}")

    stream = spark.readStream.schema(SCHEMA).option("header", "true").option("maxFilesPerTrigger", 1)
    writer = (
        stream.csv(args.landing)
        .writeStream.foreachBatch(write_batch)
        .option("checkpointLocation", job.checkpoint_location)
    )
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{args.trigger_seconds} seconds")
    outcome = job.run(writer.start())
    print(f"stream {outcome.ended} at batch {outcome.last_batch_id}; checkpoint {outcome.checkpoint_location}")
    spark.stop()


if __name__ == "__main__":
    main()
