"""The domain: what a job, its result and its entry are, and the pure rules about them.

No I/O and no Airflow, Redis or Spark: the decision table (:mod:`.decision`), job identity and
fingerprint (:mod:`.identity`), where a job's files live (:mod:`.paths`), the XCom payload
(:mod:`.payload`), recompute requests (:mod:`.recompute`), the sensor's wait rule (:mod:`.wait`),
SQL statements (:mod:`.sql_script`) and the vocabulary they share (:mod:`.model`). The backend
(:mod:`airflow_jrs.store`), the protocol and the Airflow adapters import it; it imports none of them.
Nothing is imported here eagerly, so importing one rule loads only that rule.
"""
