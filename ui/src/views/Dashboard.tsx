/**
 * The dashboard widget: what needs a person's eye (dirty and quarantined entries, the oldest
 * dirty one) and what runs (leases held). Falls back to the list and lease endpoints on an
 * API server without ``/api/summary``.
 */
import { Box, Card, HStack, Link, SimpleGrid, Stat, Text } from "@chakra-ui/react";
import { Link as RouterLink } from "react-router-dom";

import { api, ApiError, type LeasesPage, type ResultsPage, type Summary } from "../api";
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
                  <Text fontSize="sm" color="fg.muted">none</Text>
                )}
              </Stat.Root>
            </SimpleGrid>
          )}
        </Card.Body>
      </Card.Root>
    </Box>
  );
}
