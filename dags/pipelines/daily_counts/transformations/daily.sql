-- How many numbers of each kind: reads the Python view above.
CREATE MATERIALIZED VIEW daily AS SELECT kind, count(*) AS n FROM numbers GROUP BY kind;
