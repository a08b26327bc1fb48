"""A tiny PySpark application for operator tests: small output, a commit marker, knobs to fail.

--output DIR      where to write (the operator passes {jrs_output})
--rows N          rows to write (default 10)
--sleep S         sleep S seconds before writing (kill tests)
--linger S        sleep S seconds after the commit marker, before Spark stops (a stop as it finishes)
--fail            exit 3 after starting Spark
--fail-once PATH  like --fail when PATH does not exist yet (and create it): the retry succeeds
--raise MESSAGE   raise an exception with MESSAGE after starting Spark (a Python traceback)
"""

import argparse
import os
import sys
import time

from pyspark.sql import SparkSession

from airflow_jrs.spark import write_commit_marker

parser = argparse.ArgumentParser()
parser.add_argument("--output", required=True)
parser.add_argument("--rows", type=int, default=10)
parser.add_argument("--sleep", type=float, default=0.0)
parser.add_argument("--linger", type=float, default=0.0)
parser.add_argument("--fail", action="store_true")
parser.add_argument("--fail-once")
parser.add_argument("--raise", dest="raise_message")
args = parser.parse_args()
if args.fail_once and not os.path.exists(args.fail_once):
    open(args.fail_once, "w").close()
    args.fail = True

spark = SparkSession.builder.appName("jrs-tiny").getOrCreate()
if args.fail:
    print("tiny_app: failing on purpose", file=sys.stderr)
    spark.stop()
    sys.exit(3)
if args.raise_message:
    spark.range(3).count()  # Spark did some work: its INFO logging surrounds the traceback
    raise ValueError(args.raise_message)
time.sleep(args.sleep)
df = spark.range(args.rows)
df.write.mode("overwrite").parquet(f"{args.output}/data")
write_commit_marker(spark, args.output, {"rows": args.rows})
time.sleep(args.linger)
spark.stop()
