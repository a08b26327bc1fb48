"""daily_counts_pipeline: a Spark Declarative Pipeline run once per day, guarded by the job result store.

``JrsSparkPipelinesOperator`` runs ``spark-pipelines run`` (pyspark's CLI) on the project in
``pipelines/daily_counts`` (``spark-pipeline.yml``: a materialized view in Python and one in SQL
reading it), once per day; a second run of a committed day (a backfill, a clear, a retry) runs
no pipeline and starts no JVM:

    counts >> counts_cleanup

Each attempt's datasets land under its fenced folder (``<output_root>/<namespace>/<job
id>/fence-<token>-<nonce>/warehouse/<dataset>``); the cleanup removes the other attempts' folders and
commits the result. ``airflow-jrs recompute`` is the full refresh of a day that is done.

Configuration (environment; optional): ``JRS_SPARK_EVENT_LOG_DIR`` turns Spark event logs on
(one file per pipeline run: how a run shows that a committed day started no Spark).
"""

from __future__ import annotations

import sys
from pathlib import Path

from airflow_jrs.operators.cleanup import JrsCleanupOperator
from airflow_jrs.operators.spark_pipelines import JrsSparkPipelinesOperator

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
from flights.settings import daily_2013, with_event_log  # noqa: E402

dag = daily_2013("daily_counts_pipeline", tags=["jrs", "spark", "spark-pipelines", "example"], doc_md=__doc__)

with dag:
    counts = JrsSparkPipelinesOperator(
        task_id="counts",
        pipeline_spec=str(HERE / "pipelines" / "daily_counts" / "spark-pipeline.yml"),
        conf=with_event_log({"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"}),
        outputs={"daily": "warehouse/daily", "numbers": "warehouse/numbers"},
    )
    counts >> JrsCleanupOperator(task_id="counts_cleanup", jobs=[counts])
