"""How a job is inspected and shown: one gathering, one JSON shape, for the UI and the CLI.

* :mod:`airflow_jrs.views.job`: everything known about a job (entry, history, lease holder,
  intent, heartbeat, stop request), read from its :class:`~airflow_jrs.protocol.JobNamespace`;
  and the namespace's held leases and in-flight intents.
* :mod:`airflow_jrs.views.json`: how those read as JSON, the one shape the Job results page's
  API (:mod:`airflow_jrs.plugins.api`) and ``airflow-jrs ... --json`` (:mod:`airflow_jrs.cli`)
  both answer with.

Both are Airflow-free: the Airflow side only adds who may see what (:mod:`airflow_jrs.plugins.security`).
"""
