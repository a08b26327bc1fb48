"""flights_sql: one day of flights per carrier, as a Spark SQL job guarded by the job result store.

``JrsSparkSqlOperator`` runs the statements below in a SparkSession of the task process
(``spark.sql()`` per statement), once per day; a second run of a committed day (a backfill, a
clear, a retry) runs no statement and starts no session:

    prepare_landing >> carriers >> carriers_cleanup

The SQL writes to its attempt's fenced folder through ``{jrs_output.carriers}`` (filled in at
launch, after Jinja); the commit marker is written after the last statement, whose one row
(``carriers``, ``flights``) becomes the result's metrics. The fingerprint covers the rendered
statements: another day, or an edit of the SQL, is another computation.

Configuration (environment; all optional), as for ``flights_pyspark``:

* ``JRS_FLIGHTS_LANDING``: folder for the extracted CSVs (default ``$AIRFLOW_HOME/jrs/landing``)
* ``JRS_SPARK_CONN_ID``: Spark connection (default ``spark_local``, whose host is ``local[N]``
  or ``spark://host`` with a port), e.g.
  ``AIRFLOW_CONN_SPARK_LOCAL='{"conn_type": "spark", "host": "local[2]"}'``
* ``JRS_SPARK_EVENT_LOG_DIR``: turn Spark event logs on (one file per session started)
"""

from __future__ import annotations

import sys
from pathlib import Path

from airflow_jrs.operators.cleanup import JrsCleanupOperator
from airflow_jrs.operators.spark_sql import JrsSparkSqlOperator

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
from flights.settings import daily_2013, landing, prepare_landing, spark_conn_id, with_event_log  # noqa: E402

LANDING = landing()
SPARK_CONN_ID = spark_conn_id()

SPARK_CONF = with_event_log(
    {
        "spark.sql.shuffle.partitions": "2",
        "spark.ui.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
    }
)

CARRIERS_SQL = """
CREATE OR REPLACE TEMPORARY VIEW flights_csv
  USING csv OPTIONS (path '{{ params.landing }}/flights.csv', header 'true', nullValue 'NA');

-- one row per carrier that flew that day, into the attempt's fenced folder
INSERT OVERWRITE DIRECTORY '{jrs_output.carriers}' USING parquet
SELECT carrier,
       count(*) AS flights,
       round(avg(CAST(dep_delay AS DOUBLE)), 2) AS avg_dep_delay,
       round(avg(IF(CAST(arr_delay AS DOUBLE) <= 15, 1.0, 0.0)), 3) AS ontime_share
FROM flights_csv
WHERE CAST(year AS INT) = {{ logical_date.year }}
  AND CAST(month AS INT) = {{ logical_date.month }}
  AND CAST(day AS INT) = {{ logical_date.day }}
GROUP BY carrier;

-- the job's figures (the result's metrics), read back from what was written
SELECT count(*) AS carriers, sum(flights) AS flights FROM parquet.`{jrs_output.carriers}`;
"""

with daily_2013("flights_sql", tags=["jrs", "spark", "sql", "example"], doc_md=__doc__) as dag:
    carriers = JrsSparkSqlOperator(
        task_id="carriers",
        sql=CARRIERS_SQL,
        params={"landing": LANDING},
        conn_id=SPARK_CONN_ID,
        conf=SPARK_CONF,
        outputs={"carriers": "carriers"},
    )
    prepare_landing(LANDING) >> carriers >> JrsCleanupOperator(task_id="carriers_cleanup", jobs=[carriers])
