"""Another DAG: the scoped user of tests/airflow/test_api_server_runs_no_dag_code.py may not read it."""

from datetime import UTC, datetime

from airflow.sdk import DAG

from airflow_jrs.operators import JrsSparkSubmitOperator

with DAG("jrs_other", schedule="@daily", start_date=datetime(2013, 1, 1, tzinfo=UTC), catchup=False):
    JrsSparkSubmitOperator(task_id="submit", application="/nowhere/other.py", conn_id="spark_local")
