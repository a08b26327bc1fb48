"""A PySpark application that finishes when the test says so: crash tests kill its task while it
runs, then let the orphaned application finish (its output and commit marker are then adopted).

--output DIR   where to write (the operator passes {jrs_output})
--gate PATH    wait until PATH exists, then write the output and the commit marker
--rows N       rows to write (default 5)
"""

import argparse
import os
import time

from pyspark.sql import SparkSession

from airflow_jrs.spark import write_commit_marker

parser = argparse.ArgumentParser()
parser.add_argument("--output", required=True)
parser.add_argument("--gate", required=True)
parser.add_argument("--rows", type=int, default=5)
args = parser.parse_args()

spark = SparkSession.builder.appName("jrs-gated").getOrCreate()
print(f"gated_app: application {spark.sparkContext.applicationId} waits for {args.gate}", flush=True)
while not os.path.exists(args.gate):
    time.sleep(0.2)
spark.range(args.rows).write.mode("overwrite").parquet(f"{args.output}/data")
write_commit_marker(spark, args.output, {"rows": args.rows})
spark.stop()
