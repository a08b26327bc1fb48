"""Where a job's application runs: the protocol's launchers and what runs beside them.

spark-submit in every deploy mode (:mod:`.spark_launcher`, with :mod:`.deploy_modes`,
:mod:`.spark_target`, :mod:`.standalone`, :mod:`.cluster_outcome`, :mod:`.submission`) under the
supervisor (:mod:`.supervisor`, :mod:`.cluster_drivers`); a SparkSession in the task process
(:mod:`.session_launcher`); a Spark Connect session (:mod:`.connect_launcher`). A new deploy mode
or a new way to run Spark goes here; the Airflow operators only pick a launcher.
"""
