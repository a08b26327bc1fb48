"""The Job results API, one router per resource (mounted by :func:`airflow_jrs.plugins.api.create_app`).

* :mod:`.pages`: ``/static/...`` (the React bundle the host's UI loads, ``static/ui/``);
* :mod:`.results`: health, the dashboard summary, the list of results, one job, the leases,
  and the task instance tab;
* :mod:`.jobs`: what a person does to one job (forget, recompute, mark clean, release from
  quarantine, stop, cancel);
* :mod:`.dags`: a DAG's calendar, and its missing-only backfill and recompute over a date range;
* :mod:`.stats`: Spark time spent and avoided, by DAG (the dashboard, ``airflow-jrs stats``) and
  by a DAG's logical dates (the calendar), from the guarded tasks' XCom payloads.

What each write does is :mod:`airflow_jrs.actions` (the CLI calls the same functions); a router
adds who may do it (:mod:`airflow_jrs.plugins.security`) and Airflow's audit log.
"""
