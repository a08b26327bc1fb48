"""Twenty-five numbers with their parity."""

from pyspark import pipelines as dp
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

spark = SparkSession.active()


@dp.materialized_view
def numbers():
    return spark.range(25).withColumn("kind", F.when(F.col("id") % 2 == 0, "even").otherwise("odd"))
