"""What a DAG's date range holds before anything runs; it writes nothing.

``airflow-jrs plan`` prints it, the missing-only backfill (:mod:`airflow_jrs.actions.backfill`)
and recompute by dates (:mod:`airflow_jrs.actions.recompute`) act on it, ``forget --dag-id``
picks its entries, and the page's calendar shows it. One concept per module:

* :mod:`.dags`: where the DAG comes from (a DAG folder for the CLI, the file the DAG processor
  parsed for the page's API server, kept per modification time);
* :mod:`.job_ids`: the range's runs as the timetable makes them (:mod:`airflow_jrs.compat` per
  Airflow minor) and each guarded task's job id by the operators' own rule;
* :mod:`.mapped`: the map indexes of a mapped task, when its DAG file says them;
* :mod:`.runs`: the runs Airflow's metadata DB has already (their conf and data interval);
* :mod:`.jobs`: where each job stands in the store and what a backfill would do with it.

It lives in ``actions/`` because the actions start from it, and its refusals are theirs: an
:class:`~airflow_jrs.actions.ActionError` with the words for each caller (a CLI flag only in the
CLI's hint), which the CLI turns into an exit code and the page into an HTTP status.
"""
