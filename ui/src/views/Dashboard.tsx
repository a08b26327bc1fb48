/**
 * The dashboard widget: what needs a person's eye (dirty and quarantined entries, the oldest
 * dirty one) and what runs (leases held). Falls back to the list and lease endpoints on an
 * API server without ``/api/summary``. Below, the Spark time guarded tasks spent and avoided
 * (``/api/stats``: the figures ``airflow-jrs stats`` prints), loaded on their own so that a
 * slow or older API server leaves the first row alone.
 */
import { Box, Card, HStack, Link, SimpleGrid, Stat, Text } from "@chakra-ui/react";
import { Link as RouterLink } from "react-router-dom";

import { api, ApiError, type LeasesPage, type ResultsPage, type Stats, type Summary } from "../api";
import { ErrorAlert, When } from "../components/common";
import { useLoad } from "../useApi";

export const NAV_ROUTE = "/plugin/job-results";

async function loadSummary(signal: AbortSignal): Promise<Summary> {
  try {
    return await api<Summary>("api/summary", { signal });
  } catch (err) {
    if (!(err instanceof ApiError) || err.status !== 404) throw err;
    const [results, leases] = await Promise.all([
      api<ResultsPage>("api/results?state=dirty&limit=500", { signal }),
      api<LeasesPage>("api/leases", { signal }),
    ]);
    const oldest = results.entries.at(-1);
    return {
      dirty: results.counts.dirty,
      quarantined: results.counts.quarantined,
      leases_held: leases.leases.length,
      oldest_dirty: oldest ? { job_id: oldest.job_id, since: oldest.created_at ?? "" } : null,
    };
  }
}

/** The Spark time figures; ``null`` from an API server that has no ``/api/stats`` yet. */
async function loadStats(signal: AbortSignal): Promise<Stats | null> {
  try {
    return await api<Stats>("api/stats", { signal });
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) return null;
    throw err;
  }
}

function TimeFigure({ label, value, title }: { label: string; value: string; title: string }) {
  return (
    <Stat.Root data-figure={label} title={title}>
      <Stat.Label>{label}</Stat.Label>
      <Stat.ValueText>{value}</Stat.ValueText>
    </Stat.Root>
  );
}

function SparkTime({ stats }: { stats: Stats }) {
  const t = stats.total;
  const since = stats.since ? `since ${stats.since.slice(0, 10)} (UTC)` : "";
  return (
    <Box mt={4} data-testid="jrs-stats">
      <Text fontSize="xs" color="fg.muted" mb={2}>
        Guarded Spark tasks {since}: the figures of <code>airflow-jrs stats</code>
      </Text>
      <SimpleGrid columns={{ base: 2, md: 4 }} gap={4}>
        <TimeFigure
          label="Spark time avoided"
          value={t.avoided}
          title={`${t.avoided_seconds} s by ${t.reused} reused results`}
        />
        <TimeFigure
          label="Spark time spent"
          value={t.spent}
          title={`${t.spent_seconds} s by ${t.computed} computed results (${t.adopted} adopted)`}
        />
        <Figure label="Reused" value={t.reused} palette="green" />
        <Figure label="Computed" value={t.computed} palette="blue" />
      </SimpleGrid>
      {t.untimed > 0 && (
        <Text fontSize="xs" color="fg.muted" mt={1}>
          {t.untimed} task{t.untimed === 1 ? "" : "s"} without a run time (not in the sums).
        </Text>
      )}
    </Box>
  );
}

function Figure({ label, value, palette }: { label: string; value: number; palette: string }) {
  return (
    <Stat.Root data-figure={label}>
      <Stat.Label>{label}</Stat.Label>
      <Stat.ValueText color={value ? `${palette}.fg` : undefined}>{value}</Stat.ValueText>
    </Stat.Root>
  );
}

export function DashboardWidget() {
  const { data, error } = useLoad("summary", loadSummary);
  const stats = useLoad("stats", loadStats);
  return (
    <Box data-testid="jrs-dashboard" mb={2}>
      <Card.Root size="sm" variant="outline">
        <Card.Header>
          <HStack justify="space-between">
            <Card.Title>Job results</Card.Title>
            <Link asChild color="fg.info" fontSize="sm">
              <RouterLink to={NAV_ROUTE}>Open</RouterLink>
            </Link>
          </HStack>
        </Card.Header>
        <Card.Body>
          <ErrorAlert title="Could not load the job results summary" error={error} />
          {data && (
            <SimpleGrid columns={{ base: 2, md: 4 }} gap={4}>
              <Figure label="Dirty" value={data.dirty} palette="yellow" />
              <Figure label="Quarantined" value={data.quarantined} palette="purple" />
              <Figure label="Leases held" value={data.leases_held} palette="blue" />
              <Stat.Root data-figure="Oldest dirty">
                <Stat.Label>Oldest dirty</Stat.Label>
                {data.oldest_dirty ? (
                  <Text fontSize="sm">
                    <Link asChild color="fg.info">
                      <RouterLink to={`${NAV_ROUTE}?job=${encodeURIComponent(data.oldest_dirty.job_id)}`}>
                        {data.oldest_dirty.job_id}
                      </RouterLink>
                    </Link>{" "}
                    <When iso={data.oldest_dirty.since} />
                  </Text>
                ) : (
                  <Text fontSize="sm" color="fg.muted">
                    none
                  </Text>
                )}
              </Stat.Root>
            </SimpleGrid>
          )}
          <ErrorAlert title="Could not load the Spark time figures" error={stats.error} />
          {stats.data && <SparkTime stats={stats.data} />}
        </Card.Body>
      </Card.Root>
    </Box>
  );
}
