"""What the guard tells the platform around it: OpenLineage events and Airflow metrics.

Both go through Airflow's own surfaces (the openlineage provider, the Task SDK's metrics), and
only where Airflow runs task code (the worker, the triggerer): never the API server or the CLI.
Neither may fail or delay a task: a backend that is down is logged once and left alone.
"""
