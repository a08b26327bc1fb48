// Job results page: plain DOM + fetch against ./api (relative URLs only: it works behind a proxy
// and under a base-URL sub-path). The browser sends Airflow's `_token` cookie with same-origin
// requests; nothing here reads or stores a token. Data is only ever put in the page with
// textContent, never as HTML.
"use strict";

(function () {
  const $ = (sel) => document.querySelector(sel);
  const state = { offset: 0, limit: 50, hasMore: false };

  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    Object.entries(props || {}).forEach(([k, v]) => {
      if (v === undefined || v === null) return;
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v);
    });
    children.flat().forEach((c) => c !== null && c !== undefined && node.append(c instanceof Node ? c : String(c)));
    return node;
  }

  async function api(path, options) {
    const response = await fetch(path, { credentials: "same-origin", headers: { Accept: "application/json" }, ...options });
    let body = null;
    try { body = await response.json(); } catch (e) { body = null; }
    if (!response.ok) {
      const detail = body && body.detail ? (typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail)) : response.statusText;
      throw new Error(`${response.status}: ${detail}`);
    }
    return body;
  }

  function say(text, isError) {
    const m = $("#message");
    if (!m) return;
    m.textContent = text || "";
    m.className = isError ? "error" : "";
  }

  // Links into Airflow's own UI, relative to this page (<base>/jrs/...): ../dags/...
  function tiHref(a) {
    const enc = encodeURIComponent;
    let href = `../dags/${enc(a.dag_id)}/runs/${enc(a.run_id)}/tasks/${enc(a.task_id)}`;
    if (a.map_index !== undefined && a.map_index !== null && a.map_index >= 0) href += `/mapped/${a.map_index}`;
    return href;
  }
  function runHref(a) {
    return `../dags/${encodeURIComponent(a.dag_id)}/runs/${encodeURIComponent(a.run_id)}`;
  }

  // Inside the UI's iframe a plain link would open Airflow inside the frame; the frame may not
  // navigate the top window (sandbox), but as a same-origin frame it may ask the UI's router.
  function airflowLink(href, text) {
    return el("a", {
      href, text,
      onclick: (event) => {
        if (window.top === window) return;
        try {
          const url = new URL(href, document.baseURI);
          window.top.history.pushState({}, "", url.pathname + url.search);
          window.top.dispatchEvent(new PopStateEvent("popstate", { state: {} }));
          event.preventDefault();
        } catch (e) { /* fall back to navigating the frame */ }
      },
    });
  }

  function sparkLink(entry) {
    if (!entry.spark_url || !/^https?:\/\//.test(entry.spark_url)) return entry.application_id || "";
    return el("a", { href: entry.spark_url, rel: "noopener noreferrer", target: "_blank", text: entry.application_id || "Spark UI" });
  }

  function stateBadge(s) {
    return el("span", { class: `state state-${s}`, "data-state": s, text: s });
  }

  // Times in the zone the Airflow UI shows (its timezone menu keeps the choice in the
  // same-origin localStorage key "timezone", JSON-encoded; unset, the UI uses the browser's
  // zone), in the UI's format with the offset spelled out: "2024-03-01 06:00:00 +00:00".
  function uiTimezone() {
    try {
      const chosen = JSON.parse(window.localStorage.getItem("timezone") || "null");
      if (typeof chosen === "string" && chosen) return chosen;
    } catch (e) { /* unreadable: fall back */ }
    return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  }

  function zoneParts(d) {
    const parts = {};
    new Intl.DateTimeFormat("en-US", {
      timeZone: uiTimezone(), year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit",
      minute: "2-digit", second: "2-digit", hourCycle: "h23", timeZoneName: "longOffset",
    }).formatToParts(d).forEach((p) => { parts[p.type] = p.value; });
    parts.offset = parts.timeZoneName.replace("GMT", "") || "+00:00";
    return parts;
  }

  function when(iso) {
    if (!iso) return "";
    const d = new Date(iso);
    if (isNaN(d)) return iso;
    try {
      const p = zoneParts(d);
      return `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}:${p.second} ${p.offset}`;
    } catch (e) {
      return d.toISOString(); // an unknown zone name: UTC, unambiguous
    }
  }

  // The "Since" field's wall time ("2024-03-01T06:00") read in the UI's zone, as an ISO instant.
  function fromUiWallTime(value) {
    const [day, time] = value.split("T");
    const [y, mo, d] = day.split("-").map(Number);
    const [h, mi] = (time || "00:00").split(":").map(Number);
    const wall = Date.UTC(y, mo - 1, d, h, mi);
    const offsetMs = (at) => {
      const m = /^([+-])(\d\d):(\d\d)$/.exec(zoneParts(new Date(at)).offset);
      return m ? (m[1] === "-" ? -1 : 1) * (Number(m[2]) * 60 + Number(m[3])) * 60000 : 0;
    };
    try {
      let instant = wall - offsetMs(wall);
      instant = wall - offsetMs(instant); // the offset at the instant itself (around a DST change)
      return new Date(instant).toISOString();
    } catch (e) {
      return new Date(value).toISOString();
    }
  }

  // -- the list ---------------------------------------------------------------------------------
  function query() {
    const form = new FormData($("#filters"));
    const params = new URLSearchParams();
    for (const [k, v] of form.entries()) {
      if (!v) continue;
      if (k === "since") params.set(k, fromUiWallTime(v));
      else params.set(k, v);
    }
    state.limit = Number(form.get("limit") || 50);
    params.set("offset", String(state.offset));
    return params;
  }

  async function loadResults() {
    say("Loading…");
    try {
      const data = await api(`api/results?${query()}`);
      $("#namespace").textContent = `namespace ${data.namespace}`;
      $("#count-dirty").textContent = data.counts.dirty;
      $("#count-quarantined").textContent = data.counts.quarantined;
      const body = $("#results tbody");
      body.replaceChildren(...data.entries.map((e) => el("tr", { "data-job-id": e.job_id },
        el("td", {}, el("a", { class: "job", href: `?job_id=${encodeURIComponent(e.job_id)}`, text: e.job_id,
          onclick: (ev) => { ev.preventDefault(); showJob(e.job_id); } })),
        el("td", {}, stateBadge(e.state)),
        el("td", { class: `status-${e.status}`, text: e.status }),
        el("td", { text: when(e.created_at) }),
        el("td", { text: e.fence ?? "" }),
        el("td", {}, e.attempt ? [airflowLink(tiHref(e.attempt), `${e.attempt.dag_id} / ${e.attempt.task_id}`), " ",
          airflowLink(runHref(e.attempt), e.attempt.run_id), ` (try ${e.attempt.try_number})`] : "unknown"),
        el("td", {}, sparkLink(e)),
      )));
      state.hasMore = data.has_more;
      $("#prev").disabled = state.offset === 0;
      $("#next").disabled = !state.hasMore;
      const first = data.entries.length ? state.offset + 1 : 0;
      $("#page").textContent = `${first}–${state.offset + data.entries.length}`;
      say(data.entries.length ? "" : "No entries match.");
    } catch (err) {
      say(`Could not load the results: ${err.message}`, true);
    }
  }

  async function loadLeases() {
    try {
      const data = await api("api/leases");
      if (!data.leases.length) {
        $("#leases tbody").replaceChildren(el("tr", {}, el("td", { colspan: "5", class: "muted", "data-empty": "true",
          text: "none: no attempt is computing a job now" })));
        return;
      }
      $("#leases tbody").replaceChildren(...data.leases.map((l) => el("tr", { "data-job-id": l.job_id },
        el("td", {}, el("a", { class: "job", href: `?job_id=${encodeURIComponent(l.job_id)}`, text: l.job_id,
          onclick: (ev) => { ev.preventDefault(); showJob(l.job_id); } })),
        el("td", { text: l.lease.token }),
        el("td", { text: [l.lease.owner.host, l.lease.owner.pid, l.lease.owner.dag_id, l.lease.owner.task_id, l.lease.owner.run_id].filter(Boolean).join(" · ") }),
        el("td", { text: `${(l.lease.ttl_ms / 1000).toFixed(1)} s` }),
        el("td", { text: l.intent ? (l.intent.application_id || l.intent.app_name || "") : "" }),
      )));
    } catch (err) {
      say(`Could not load the leases: ${err.message}`, true);
    }
  }

  // -- one job ----------------------------------------------------------------------------------
  function section(title, value) {
    if (value === null || value === undefined || (Array.isArray(value) && !value.length)) return null;
    return el("div", {}, el("h3", { text: title }), el("pre", { text: JSON.stringify(value, null, 2) }));
  }

  // Each history item first says when, why and by whom it moved there (its "moved" note).
  function historySection(items) {
    if (!items || !items.length) return null;
    const lines = items.map((h) => el("li", { "data-reason": h.moved ? h.moved.reason : "" },
      h.moved ? `${when(h.moved.moved_at)} · ${h.moved.reason}${h.moved.by ? ` by ${h.moved.by.text}` : ""}` : "moved (no note)",
      ` — was ${h.status} (${h.state}), created ${when(h.created_at)}${h.fence != null ? `, fence ${h.fence}` : ""}`));
    return el("div", {}, el("h3", { text: "History (newest first)" }), el("ul", { class: "history" }, ...lines),
      el("pre", { text: JSON.stringify(items, null, 2) }));
  }

  // What successors did about dead attempts of the job (newest first): which try died, what was
  // found, waited for, stopped, adopted or submitted again, when (the store's clock).
  function recoverySection(steps) {
    if (!steps || !steps.length) return null;
    const lines = steps.map((r) => el("li", { "data-event": r.event },
      `${when(r.at)} · ${r.event.replace("_", " ")}${r.fence != null ? ` by fence ${r.fence}` : ""}`
        + `${r.predecessor != null ? ` (of fence ${r.predecessor})` : ""}: ${r.text}`));
    return el("div", { class: "recoveries" }, el("h3", { text: "Recoveries (newest first)" }),
      el("ul", { class: "recoveries" }, ...lines));
  }

  // The page's own confirmation dialog, not window.confirm(): the UI frames this page in a
  // sandbox without allow-modals, where the browser ignores confirm() (it returns false) and
  // every action would silently do nothing.
  const ACTION_LABELS = { recompute: "Recompute", forget: "Forget", "mark-clean": "Mark clean", "release-quarantine": "Release", stop: "Stop", cancel: "Cancel stream" };
  function confirmAction(question, label) {
    return new Promise((resolve) => {
      let answered = false;
      const dialog = el("dialog", { id: "confirm", "aria-label": "Confirm" });
      const answer = (ok) => {
        if (answered) return;
        answered = true;
        if (dialog.open) dialog.close();
        dialog.remove();
        resolve(ok);
      };
      dialog.append(
        el("p", { text: question }),
        el("div", { class: "actions" },
          el("button", { type: "button", "data-confirm": "yes", text: label, onclick: () => answer(true) }),
          el("button", { type: "button", "data-confirm": "no", text: "Back", onclick: () => answer(false) })),
      );
      dialog.addEventListener("close", () => answer(false)); // Escape
      document.body.append(dialog);
      dialog.showModal();
    });
  }

  async function act(jobId, action, question, extra = {}) {
    if (!(await confirmAction(question, ACTION_LABELS[action] || action))) return;
    try {
      const done = await api(`api/results/${jobId.split("/").map(encodeURIComponent).join("/")}/${action}`, {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "application/json" },
        body: JSON.stringify({ ...extra, confirm: jobId }),
      });
      // Reload first: loading the list resets the message line.
      if (document.body.dataset.page === "results") { await loadResults(); loadLeases(); }
      await showJob(jobId);
      say(`${jobId}: ${done.message || done.done}`);
    } catch (err) {
      say(`${action} failed: ${err.message}`, true);
    }
  }

  function renderDetail(d, task) {
    const box = $("#detail");
    const e = d.entry;
    const head = el("h2", {}, d.job_id, " ", e ? stateBadge(e.state) : el("span", { class: "badge", text: d.quarantined ? "quarantined" : "no result" }));
    const facts = [];
    if (task) {
      if (task.reused) facts.push(el("span", { class: "badge", "data-reused": "true", text: "reused: this task did not run Spark" }));
      else if (task.produced_entry) facts.push(el("span", { class: "badge", "data-reused": "false", text: "computed by this task" }));
      if (task.running) facts.push(el("span", { class: "badge", text: "running" }));
    }
    if (e) {
      facts.push(el("p", {}, `Status ${e.status} · fingerprint ${e.fingerprint || "–"} · fence ${e.fence ?? "–"} · created ${when(e.created_at)}`));
      if (e.attempt) facts.push(el("p", {}, "Produced by ", airflowLink(tiHref(e.attempt), `${e.attempt.dag_id}.${e.attempt.task_id}`),
        " in run ", airflowLink(runHref(e.attempt), e.attempt.run_id), ` (try ${e.attempt.try_number})`));
      if (e.application_id) facts.push(el("p", {}, "Spark application ", sparkLink(e)));
      if (e.error) facts.push(el("p", { class: "error", text: e.error }));
    }
    const actions = el("div", { class: "actions" });
    if (d.can_edit) {
      if (e && e.attempt && !d.lease) actions.append(el("button", { type: "button", "data-action": "recompute", text: "Recompute",
        onclick: () => act(d.job_id, "recompute", `Recompute ${d.job_id} now? Its result is forgotten (kept in its history) and `
          + `${e.attempt.dag_id}.${e.attempt.task_id} in run ${e.attempt.run_id} is cleared, so it runs Spark again. `
          + "A later backfill of the date reuses the new result.", { created_at: e.created_at }) }));
      if (e) actions.append(el("button", { type: "button", "data-action": "forget", text: "Forget (run again)",
        onclick: () => act(d.job_id, "forget", `Forget the result of ${d.job_id}? The next run of the job computes it again (the entry stays in its history).`, { created_at: e.created_at }) }));
      if (e && e.state === "dirty") actions.append(el("button", { type: "button", "data-action": "mark-clean", text: "Mark clean",
        onclick: () => act(d.job_id, "mark-clean", `Mark ${d.job_id} clean without running its cleanup? Only if its staging data is already gone.`) }));
      if (d.quarantined) actions.append(el("button", { type: "button", "data-action": "release-quarantine", text: "Release quarantine",
        onclick: () => act(d.job_id, "release-quarantine", `Drop the quarantined entry of ${d.job_id}? The job may run again.`) }));
      if (d.intent) {
        actions.append(el("button", { type: "button", "data-action": "stop", text: "Stop stream",
          onclick: () => act(d.job_id, "stop", `Stop the stream ${d.job_id} at its next batch boundary?`) }));
        actions.append(el("button", { type: "button", "data-action": "cancel", text: "Cancel stream",
          onclick: () => act(d.job_id, "cancel", `Cancel the stream ${d.job_id} at once?`) }));
      }
    }
    // (replaceChildren would print an empty section's null as the text "null")
    box.replaceChildren(...[head, ...facts, actions,
      section("Problem", d.problem),
      section("Outputs", e && e.outputs), section("Metrics", e && e.metrics),
      section("Lease holder", d.lease), section("Intent (running attempt)", d.intent),
      section("Heartbeat", d.heartbeat), recoverySection(d.recoveries), historySection(d.history),
      task && task.payload && Object.keys(task.payload).length ? section("What this task returned", task.payload) : null,
    ].filter((node) => node !== null && node !== undefined));
    box.hidden = false;
  }

  async function showJob(jobId) {
    try {
      const d = await api(`api/results/${jobId.split("/").map(encodeURIComponent).join("/")}`);
      renderDetail(d, null);
    } catch (err) {
      say(`Could not load ${jobId}: ${err.message}`, true);
    }
  }

  async function loadTaskInstance() {
    const params = new URLSearchParams(window.location.search);
    try {
      const d = await api(`api/task-instance?${params}`);
      if (!d.job_id) { say("This task has no job in the store (it did not run a guarded Spark job, or has not started)."); return; }
      say("");
      renderDetail(d, d.task);
    } catch (err) {
      say(`Could not load this task's job: ${err.message}`, true);
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    if (document.body.dataset.page === "task-instance") { loadTaskInstance(); return; }
    $("#filters").addEventListener("submit", (ev) => { ev.preventDefault(); state.offset = 0; loadResults(); });
    $("#prev").addEventListener("click", () => { state.offset = Math.max(0, state.offset - state.limit); loadResults(); });
    $("#next").addEventListener("click", () => { state.offset += state.limit; loadResults(); });
    loadResults();
    loadLeases();
    const jobId = new URLSearchParams(window.location.search).get("job_id");
    if (jobId) showJob(jobId);
  });
})();
