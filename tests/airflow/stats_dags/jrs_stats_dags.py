"""Two DAGs for tests/airflow/test_stats_route.py: guarded tasks (one mapped) and an unguarded one."""

from datetime import UTC, datetime

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG

from airflow_jrs.operators import JrsSparkSubmitOperator

with DAG("jrs_stats_a", schedule="@daily", start_date=datetime(2013, 1, 1, tzinfo=UTC), catchup=False):
    JrsSparkSubmitOperator(task_id="submit", application="/nowhere/a.py", conn_id="spark_local")
    JrsSparkSubmitOperator.partial(task_id="per_part", application="/nowhere/p.py", conn_id="spark_local").expand(
        application_args=[["--part", "1"], ["--part", "2"]]
    )
    EmptyOperator(task_id="plain")

with DAG("jrs_stats_b", schedule="@daily", start_date=datetime(2013, 1, 1, tzinfo=UTC), catchup=False):
    JrsSparkSubmitOperator(task_id="submit", application="/nowhere/b.py", conn_id="spark_local")
