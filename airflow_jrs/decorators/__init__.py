"""Task decorators of the provider (``@task.jrs_pyspark``), registered through its provider info."""
