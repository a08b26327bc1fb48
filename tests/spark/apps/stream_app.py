"""A small Structured Streaming application for the stop/cancel tests (FLIP-45).

Reads CSV files (``id,part``) from ``--input`` one file per micro-batch and appends them to the
job's stable output folder with the exactly-once file sink (Parquet), checkpointed at the job's
stable checkpoint location; :func:`airflow_jrs.spark.streaming_job` handles stop and cancel.

--input DIR          landing folder
--output DIR         output folder (default: the job's, from Spark conf)
--checkpoint DIR     checkpoint (default: the job's, from Spark conf)
--control DIR        control folder (default: the job's, from Spark conf)
--available-now      process what is there, then finish
--trigger S          processing-time trigger interval in seconds (default 1)
--row-sleep S        sleep S seconds per row in a Python UDF (slow batches)
--slow-from-part K   only rows of files with part >= K sleep (default 0: all)
"""

import argparse
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, StructField, StructType

from airflow_jrs.spark import streaming_job

parser = argparse.ArgumentParser()
parser.add_argument("--input", required=True)
parser.add_argument("--output")
parser.add_argument("--checkpoint")
parser.add_argument("--control")
parser.add_argument("--available-now", action="store_true")
parser.add_argument("--trigger", type=float, default=1.0)
parser.add_argument("--row-sleep", type=float, default=0.0)
parser.add_argument("--slow-from-part", type=int, default=0)
args = parser.parse_args()

spark = SparkSession.builder.appName("jrs-stream-test").getOrCreate()
job = streaming_job(spark, checkpoint_location=args.checkpoint, output_dir=args.output, control_dir=args.control)
schema = StructType([StructField("id", IntegerType()), StructField("part", IntegerType())])
df = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).option("header", "true").csv(args.input)
if args.row_sleep:
    pause, slow_from = args.row_sleep, args.slow_from_part

    @F.udf(IntegerType())
    def slow(value, part):
        if part >= slow_from:
            time.sleep(pause)
        return value

    df = df.withColumn("id", slow("id", "part"))
writer = (
    df.writeStream.format("parquet")
    .option("path", job.output_dir)
    .option("checkpointLocation", job.checkpoint_location)
)
writer = (
    writer.trigger(availableNow=True)
    if args.available_now
    else writer.trigger(processingTime=f"{args.trigger} seconds")
)
outcome = job.run(writer.start())
print(
    f"JRS_STREAM_OUTCOME={outcome.ended} last_batch_id={outcome.last_batch_id} boundary={outcome.boundary}", flush=True
)
spark.stop()
