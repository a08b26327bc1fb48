"""What a DAG's date range holds before anything runs; it writes nothing.

``airflow-jrs plan`` prints it, the missing-only backfill (:mod:`airflow_jrs.actions.backfill`)
and recompute by dates (:mod:`airflow_jrs.actions.recompute`) act on it, ``forget --dag-id``
picks its entries, and the page's calendar shows it. One concept per module:

* :mod:`.dags`: where the DAG comes from: Airflow's serialized DAG (the page reads it from the
  metadata DB; the CLI serializes what it parsed from a DAG folder), never a DAG file imported in
  the API server;
* :mod:`.serialized`: the guarded tasks as the serialized DAG keeps them (the facts the
  dag-processor serialized; a mapped task's map indexes when the DAG says them);
* :mod:`.job_ids`: the range's runs as the timetable makes them (:mod:`airflow_jrs.compat` per
  Airflow minor) and each guarded task's job id by the operators' own rule, rendered sandboxed;
* :mod:`.runs`: the runs Airflow's metadata DB has already (their conf and data interval);
* :mod:`.jobs`: where each job stands in the store and what a backfill would do with it.

It lives in ``actions/`` because the actions start from it, and its refusals are theirs: an
:class:`~airflow_jrs.actions.ActionError` with the words for each caller (a CLI flag only in the
CLI's hint), which the CLI turns into an exit code and the page into an HTTP status.
"""
