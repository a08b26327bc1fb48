"""A PySpark application that does not import airflow_jrs and detects a second copy of itself.

While it computes it holds an exclusive ``flock`` on ``--lock`` (a file shared by every
"host"); failing to get it at once means another copy of the job is computing right now, and
it appends a line to ``--overlaps`` (the test asserts that file never appears). ``--commit``
writes the commit marker through airflow_jrs (so a successor can adopt the output); without
it the application never imports our package.

--output DIR --lock FILE --overlaps FILE [--sleep S] [--commit]; Spark conf ``spark.jrstest.sleep``
adds to ``--sleep`` (conf is not part of the job's fingerprint: two attempts of one job can differ).
"""

import argparse
import fcntl
import os
import time

from pyspark.sql import SparkSession

parser = argparse.ArgumentParser()
parser.add_argument("--output", required=True)
parser.add_argument("--lock", required=True)
parser.add_argument("--overlaps", required=True)
parser.add_argument("--sleep", type=float, default=0.0)
parser.add_argument("--commit", action="store_true")
args = parser.parse_args()

spark = SparkSession.builder.getOrCreate()
lock = open(args.lock, "a")
try:
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    with open(args.overlaps, "a") as out:
        out.write(f"{os.getpid()} {time.time()} {args.output}\n")
    fcntl.flock(lock, fcntl.LOCK_EX)
deadline = time.monotonic() + args.sleep + float(spark.conf.get("spark.jrstest.sleep", "0"))
while time.monotonic() < deadline:  # "computing", in steps, as long as asked
    spark.range(10).count()
    time.sleep(0.5)
spark.range(10).write.mode("overwrite").parquet(f"{args.output}/data")
if args.commit:
    from airflow_jrs.spark import write_commit_marker

    write_commit_marker(spark, args.output, {"rows": 10})
spark.stop()
