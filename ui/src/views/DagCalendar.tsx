/**
 * The DAG's "Job calendar": one row per date (run key), one column per guarded job, each cell
 * the job's state for that date. Choosing a range of dates offers "Backfill missing dates" and
 * "Recompute"; each shows the API's dry run (the runs and jobs it will touch, downstream jobs
 * included) before anyone confirms. The Spark time the dates' runs avoided and spent comes from
 * a request of its own (``api/dags/{dag}/stats``), beside the calendar's: it slows nothing, and
 * the calendar shows without it.
 */
import { Badge, Box, Button, Field, Heading, HStack, Input, List, Stack, Table, Text } from "@chakra-ui/react";
import { useMemo, useState } from "react";

import {
  api,
  type Calendar,
  type CellDetail,
  type CellState,
  type DateFacts,
  type DateStats,
  type RangePreview,
} from "../api";
import { ConfirmDialog } from "../components/ConfirmDialog";
import { ErrorAlert, Loading, Notice, Raw, StateBadge } from "../components/common";
import { useLoad } from "../useApi";
import {
  CELL,
  columnLabel,
  countAll,
  countStates,
  dayOf,
  describeCell,
  describeItem,
  describeMap,
  openingRange,
  pick as pickDay,
  type Selection,
  short,
  sparkTime,
} from "./calendar";
import type { HostProps } from "./TaskInstanceTab";

type Kind = "backfill-missing" | "recompute";

/** The logical date of the DAG's most recently created run (Airflow's own REST API, same
 * sign-in): the calendar opens on the weeks around it rather than on today, which an old DAG
 * never reaches. Most recently created, not latest by date: a backfill of old dates creates
 * runs far behind the scheduler's latest, and those are the dates a person comes to look at. */
async function latestRun(dagId: string, signal: AbortSignal): Promise<string | null> {
  const url = new URL(`api/v2/dags/${encodeURIComponent(dagId)}/dagRuns?order_by=-id&limit=1`, document.baseURI);
  const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" }, signal });
  if (!response.ok) return null;
  const body = (await response.json()) as { dag_runs?: { logical_date?: string | null }[] };
  return body.dag_runs?.[0]?.logical_date ?? null;
}

function Preview({ preview }: { preview: RangePreview }) {
  const runs = preview.runs ?? [];
  const jobs = preview.jobs ?? [];
  const knock = (preview.knock_on as unknown[] | undefined) ?? [];
  const blocked = (preview.blocked as unknown[] | undefined) ?? [];
  const notes = ((preview.notes as unknown[] | undefined) ?? []).map((n) =>
    typeof n === "string" ? n : describeItem(n),
  );
  return (
    <Stack gap={3} data-testid="preview">
      <Text>
        {runs.length} run{runs.length === 1 ? "" : "s"} and {jobs.length} job{jobs.length === 1 ? "" : "s"}
        {preview.how ? ` (as ${preview.how === "backfill" ? "an Airflow backfill" : "separate runs"})` : ""}.
      </Text>
      {runs.length > 0 && (
        <Box>
          <Text fontWeight="semibold">Runs</Text>
          <List.Root ps={4} maxH="40" overflowY="auto" fontSize="sm">
            {runs.map((r, i) => (
              <List.Item key={i}>{describeItem(r)}</List.Item>
            ))}
          </List.Root>
        </Box>
      )}
      {jobs.length > 0 && (
        <Box>
          <Text fontWeight="semibold">Jobs</Text>
          <List.Root ps={4} maxH="40" overflowY="auto" fontSize="sm">
            {jobs.map((j, i) => (
              <List.Item key={i}>{describeItem(j)}</List.Item>
            ))}
          </List.Root>
        </Box>
      )}
      {knock.length > 0 && (
        <Box>
          <Text fontWeight="semibold">Downstream jobs recomputed too</Text>
          <List.Root ps={4} maxH="40" overflowY="auto" fontSize="sm">
            {knock.map((j, i) => (
              <List.Item key={i}>{describeItem(j)}</List.Item>
            ))}
          </List.Root>
        </Box>
      )}
      {blocked.length > 0 && (
        <Box>
          <Text fontWeight="semibold">Blocked (not run)</Text>
          <List.Root ps={4} maxH="40" overflowY="auto" fontSize="sm">
            {blocked.map((j, i) => (
              <List.Item key={i}>{describeItem(j)}</List.Item>
            ))}
          </List.Root>
        </Box>
      )}
      {notes.length > 0 && (
        <List.Root ps={4} fontSize="sm" color="fg.muted">
          {notes.map((n, i) => (
            <List.Item key={i}>{n}</List.Item>
          ))}
        </List.Root>
      )}
      <Raw label="Raw preview" value={preview} />
    </Stack>
  );
}

export function DagCalendar({ dagId }: HostProps) {
  // The dates someone chose; until then, the weeks around the latest run (once it is known: a
  // DAG without a run, or whose runs cannot be read, opens on today's).
  const [chosen, setRange] = useState<[string, string] | null>(null);
  const [openedAt] = useState(() => Date.now());
  const latest = useLoad(dagId && chosen === null ? `latest|${dagId}` : null, (signal) =>
    latestRun(dagId ?? "", signal),
  );
  const known = latest.data !== undefined || latest.error !== undefined;
  const range = chosen ?? (known ? openingRange(latest.data ?? null, openedAt) : null);
  const [start, end] = range ?? ["", ""];
  const setStart = (v: string) => setRange([v, end]);
  const setEnd = (v: string) => setRange([start, v]);
  const [selection, setSelection] = useState<Selection>({ sel: null, anchor: null });
  const sel = selection.sel;
  const [tasks, setTasks] = useState<Set<string>>(new Set());
  const [dialog, setDialog] = useState<{ kind: Kind; preview: RangePreview } | null>(null);
  const [previewError, setPreviewError] = useState<Error>();
  const [busy, setBusy] = useState<Kind | null>(null);
  const [done, setDone] = useState<string>();

  const dag = encodeURIComponent(dagId ?? "");
  const key = dagId && range ? `${dagId}|${start}|${end}` : null;
  const { data, error, reload } = useLoad(key, (signal) =>
    api<Calendar>(`api/dags/${dag}/calendar?start=${start}&end=${end}`, { signal }),
  );

  const stats = useLoad(key ? `stats|${key}` : null, (signal) =>
    api<DateStats>(`api/dags/${dag}/stats?start=${start}&end=${end}`, { signal }),
  );

  // The tooltips' facts of a date, asked when one of its cells is first hovered: the calendar
  // itself carries none, so a year of jobs stays a small answer (docs/reference/ui-api.md).
  const [facts, setFacts] = useState<{ key: string | null; dates: Record<string, Record<string, CellDetail> | null> }>({
    key: null,
    dates: {},
  });
  const factsOf = (logicalDate: string | null) =>
    logicalDate && facts.key === key ? (facts.dates[logicalDate] ?? undefined) : undefined;
  const askFacts = (logicalDate: string | null) => {
    if (!logicalDate || !key || (facts.key === key && logicalDate in facts.dates)) return;
    const asked = key;
    setFacts((f) => ({ key: asked, dates: { ...(f.key === asked ? f.dates : {}), [logicalDate]: null } }));
    api<DateFacts>(
      `api/dags/${dag}/calendar/facts?start=${start}&end=${end}&logical_date=${encodeURIComponent(logicalDate)}`,
    )
      .then((found) =>
        setFacts((f) => (f.key === asked ? { key: asked, dates: { ...f.dates, [logicalDate]: found.cells } } : f)),
      )
      .catch(() => undefined); // a tooltip without facts still names the job and its state
  };
  const dateStats = (d: Calendar["dates"][number]) => (d.logical_date ? stats.data?.dates[d.logical_date] : undefined);

  const selected = (day: string) => sel !== null && day >= sel[0] && day <= sel[1];
  const counts = useMemo(() => countStates(data?.dates ?? []), [data]);

  const pick = (day: string, extend: boolean) => setSelection((s) => pickDay(s, day, extend));

  const body = (kind: Kind, dryRun: boolean) => ({
    start: sel?.[0],
    end: sel?.[1],
    dry_run: dryRun,
    ...(kind === "recompute" ? { task_ids: tasks.size ? [...tasks] : null } : {}),
  });

  const preview = async (kind: Kind) => {
    setBusy(kind);
    setPreviewError(undefined);
    setDone(undefined);
    try {
      const p = await api<RangePreview>(`api/dags/${dag}/${kind}`, { method: "POST", body: body(kind, true) });
      setDialog({ kind, preview: p });
    } catch (err) {
      setPreviewError(err as Error);
    } finally {
      setBusy(null);
    }
  };

  const label = (k: Kind) => (k === "recompute" ? "Recompute" : "Backfill missing dates");

  return (
    <Box p={2} data-testid="jrs-calendar">
      <Stack gap={4}>
        <HStack justify="space-between" wrap="wrap" align="end">
          <Heading size="md">Job calendar</Heading>
          <HStack gap={3} align="end">
            <Field.Root w="40">
              <Field.Label fontSize="xs">From</Field.Label>
              <Input
                size="sm"
                type="date"
                value={start}
                onChange={(e) => setStart(e.target.value)}
                data-testid="from"
              />
            </Field.Root>
            <Field.Root w="40">
              <Field.Label fontSize="xs">To</Field.Label>
              <Input size="sm" type="date" value={end} onChange={(e) => setEnd(e.target.value)} data-testid="to" />
            </Field.Root>
          </HStack>
        </HStack>
        <HStack gap={2} wrap="wrap" fontSize="sm">
          {(Object.keys(CELL) as CellState[]).map((s) => (
            <StateBadge key={s} state={s} label={`${CELL[s].word} ${counts[s] ?? 0}`} />
          ))}
        </HStack>
        {data?.legend && (
          <Text fontSize="xs" color="fg.muted" data-testid="legend">
            Dates are logical dates in {data.legend.time_zone}. Stale: {data.legend.stale}. A mapped task:{" "}
            {data.legend.mapped}.
          </Text>
        )}
        {stats.data && (stats.data.total.computed > 0 || stats.data.total.reused > 0) && (
          <Text
            fontSize="sm"
            data-testid="calendar-stats"
            title="from the guarded tasks' XComs: docs, Spark time saved"
          >
            These dates: {sparkTime(stats.data.total)}.
          </Text>
        )}
        {data?.notes?.map((note) => (
          <Notice key={note} status="info">
            {note}
          </Notice>
        ))}
        {data && data.jobs.length > 0 && data.dates.length > 0 && (counts.missing ?? 0) === countAll(counts) && (
          <Notice status="info">
            No job of this DAG has a result between {start} and {end}: choose other dates above (the calendar opens on
            the DAG's most recently created run).
          </Notice>
        )}
        <ErrorAlert title="Could not load the calendar" error={error} />
        {!data && !error && <Loading />}
        {data && !data.jobs.length && <Notice status="info">This DAG has no guarded Spark jobs.</Notice>}
        {data && data.jobs.length > 0 && (
          <>
            <Text fontSize="sm" color="fg.muted">
              Click a date to choose it, then another (or shift-click) to choose a range. Click a job's name to
              recompute only some jobs. Hover a square for its job.
            </Text>
            <Box overflowX="auto">
              <Table.Root size="sm" variant="outline" data-testid="calendar" w="auto">
                <Table.Header>
                  <Table.Row>
                    <Table.ColumnHeader position="sticky" left={0} bg="bg" zIndex={1}>
                      Job
                    </Table.ColumnHeader>
                    {data.dates.map((d, i) => {
                      const day = dayOf(d);
                      const column = columnLabel(day, i === 0);
                      return (
                        <Table.ColumnHeader
                          key={d.run_key ?? day}
                          px={0}
                          minW="7"
                          textAlign="center"
                          cursor="pointer"
                          bg={selected(day) ? "bg.emphasized" : undefined}
                          onClick={(e) => pick(day, e.shiftKey)}
                          data-date={day}
                          data-selected={selected(day) || undefined}
                          title={`${day}${d.run_ids.length ? ` (runs: ${d.run_ids.join(", ")})` : " (no run)"}`}
                          fontSize="2xs"
                        >
                          <Text color="fg.muted" h="3">
                            {column.month}
                          </Text>
                          <Text>{column.day}</Text>
                        </Table.ColumnHeader>
                      );
                    })}
                  </Table.Row>
                </Table.Header>
                <Table.Body>
                  {data.jobs.map((j) => (
                    <Table.Row key={j.task_id} data-task-row={j.task_id}>
                      <Table.Cell position="sticky" left={0} bg="bg" zIndex={1} whiteSpace="nowrap">
                        <Button
                          size="2xs"
                          variant={tasks.has(j.task_id) ? "solid" : "ghost"}
                          onClick={() =>
                            setTasks((t) => {
                              const n = new Set(t);
                              if (n.has(j.task_id)) n.delete(j.task_id);
                              else n.add(j.task_id);
                              return n;
                            })
                          }
                          data-task={j.task_id}
                          title="Recompute only the chosen jobs (none chosen: all)"
                        >
                          {j.label}
                        </Button>
                      </Table.Cell>
                      {data.dates.map((d) => {
                        const day = dayOf(d);
                        const cell = d.cells[j.task_id] ?? { state: "missing" as CellState, job_id: "" };
                        const word = CELL[cell.state]?.word ?? cell.state;
                        const map = describeMap(cell);
                        const facts = describeCell(cell, factsOf(d.logical_date)?.[j.task_id], data.legend);
                        return (
                          <Table.Cell
                            key={d.run_key ?? day}
                            px={0}
                            textAlign="center"
                            cursor="pointer"
                            bg={selected(day) ? "bg.emphasized" : undefined}
                            onClick={(e) => pick(day, e.shiftKey)}
                            onMouseEnter={() => askFacts(d.logical_date)}
                            title={`${day} ${j.label}: ${word}${cell.job_id ? ` (${cell.job_id})` : ""}${map}${facts}`}
                          >
                            <Box
                              display="inline-block"
                              w="4"
                              h="4"
                              borderRadius="sm"
                              bg={CELL[cell.state]?.bg ?? "gray.solid"}
                              borderWidth={cell.state === "missing" ? "1px" : 0}
                              borderStyle="dashed"
                              borderColor="border.emphasized"
                              data-cell={cell.state}
                              data-date={day}
                              data-task={j.task_id}
                              aria-label={`${j.label} ${day}: ${word}`}
                            />
                          </Table.Cell>
                        );
                      })}
                    </Table.Row>
                  ))}
                  {stats.data && (
                    <Table.Row data-testid="calendar-stats-row">
                      <Table.Cell
                        position="sticky"
                        left={0}
                        bg="bg"
                        zIndex={1}
                        whiteSpace="nowrap"
                        fontSize="xs"
                        color="fg.muted"
                        title="Spark time the guarded tasks of each date's runs avoided by reusing results"
                      >
                        Spark avoided
                      </Table.Cell>
                      {data.dates.map((d) => {
                        const day = dayOf(d);
                        const f = dateStats(d);
                        return (
                          <Table.Cell
                            key={d.run_key ?? day}
                            px={0}
                            textAlign="center"
                            fontSize="2xs"
                            color="fg.muted"
                            title={f ? `${day}: ${sparkTime(f)}` : `${day}: no guarded task handed a result on`}
                            data-date={day}
                            data-avoided={f?.avoided_seconds ?? 0}
                          >
                            {f ? short(f.avoided_seconds) : ""}
                          </Table.Cell>
                        );
                      })}
                    </Table.Row>
                  )}
                </Table.Body>
              </Table.Root>
              {!data.dates.length && (
                <Text color="fg.muted" py={2}>
                  No dates in this range.
                </Text>
              )}
            </Box>
          </>
        )}
        <HStack gap={3} wrap="wrap">
          <Text fontSize="sm" data-testid="selection">
            {sel ? (
              <>
                Chosen: <b>{sel[0]}</b>
                {sel[1] !== sel[0] ? (
                  <>
                    {" "}
                    to <b>{sel[1]}</b>
                  </>
                ) : null}
                {tasks.size ? (
                  <>
                    {" "}
                    · jobs{" "}
                    {[...tasks].map((t) => (
                      <Badge key={t} ms={1}>
                        {t}
                      </Badge>
                    ))}
                  </>
                ) : null}
              </>
            ) : (
              "No dates chosen."
            )}
          </Text>
          <Button
            size="sm"
            variant="outline"
            disabled={!sel}
            loading={busy === "backfill-missing"}
            onClick={() => void preview("backfill-missing")}
            data-action="backfill-missing"
          >
            Backfill missing dates…
          </Button>
          <Button
            size="sm"
            variant="outline"
            colorPalette="red"
            disabled={!sel}
            loading={busy === "recompute"}
            onClick={() => void preview("recompute")}
            data-action="recompute-range"
          >
            Recompute…
          </Button>
        </HStack>
        <ErrorAlert title="Could not preview" error={previewError} />
        {done && <Notice status="success">{done}</Notice>}
      </Stack>
      <ConfirmDialog
        open={dialog !== null}
        title={dialog ? `${label(dialog.kind)}: ${sel?.[0]} to ${sel?.[1]}` : ""}
        typed={dagId ?? ""}
        typedLabel="the DAG id"
        confirmLabel={dialog ? label(dialog.kind) : ""}
        danger={dialog?.kind === "recompute"}
        onClose={() => setDialog(null)}
        onConfirm={async () => {
          if (!dialog) return;
          const res = await api<RangePreview>(`api/dags/${dag}/${dialog.kind}`, {
            method: "POST",
            body: body(dialog.kind, false),
          });
          setDone(
            `${label(dialog.kind)} started: ${(res.runs ?? []).length} run(s), ${(res.jobs ?? []).length} job(s).`,
          );
          reload();
        }}
      >
        {dialog && (
          <>
            <Text>
              {dialog.kind === "recompute"
                ? "These jobs' results are forgotten (kept in history) and their tasks cleared, so they run Spark again:"
                : "Runs are created only for the dates whose jobs have no result; committed dates are not touched:"}
            </Text>
            <Preview preview={dialog.preview} />
          </>
        )}
      </ConfirmDialog>
    </Box>
  );
}
