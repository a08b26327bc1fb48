"""Where a job's application runs: the protocol's launchers and what runs beside them.

spark-submit in every deploy mode (:mod:`.spark_launcher`, with :mod:`.deploy_modes`: a module
per mode and one registry, :mod:`.cluster_outcome`, :mod:`.submission`) under the supervisor
(:mod:`.supervisor`); a SparkSession in the task process (:mod:`.session_launcher`); a Spark
Connect session (:mod:`.connect_launcher`). A new deploy mode is a module of
:mod:`.deploy_modes` and a line in its registry; a new way to run Spark is a launcher here; the
Airflow operators only pick a launcher.
"""
