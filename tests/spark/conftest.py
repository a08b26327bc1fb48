"""Fixtures of the Spark tests: the Spark Connect server fixture ``connect_server`` lives in
tests/conftest.py, so the Spark and the Airflow tests share one server per session."""
