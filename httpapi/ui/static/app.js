// The dibs dashboard: plain JavaScript, no libraries, nothing loaded from
// elsewhere. Live data comes from /ui/events (server-sent events); actions
// call the admin JSON API with the session cookie and the CSRF token.
"use strict";

const $ = (sel) => document.querySelector(sel);
const HISTORY_MS = 600e3; // the charts' ten minutes
const LAG_ALERT_S = 10; // an issue lag past this stands out
const TIMELINE_EVERY_MS = 10e3; // how often the detail re-reads the database's timeline

const state = {
  csrf: "",
  events: null,
  promos: new Map(), // id -> last snapshot entry
  rows: new Map(), // id -> <tr>
  // id -> [[unix_ms, claims/s, rejected/s, settled/s, lag s|null, waiting|null,
  // admitted/s|null, abandoned/s|null], ...]: the server's ring, then the snapshots.
  series: new Map(),
  timeline: { id: "", at: 0, buckets: [] }, // the database's last ten minutes of the selected promotion
  selected: "",
  dlFailed: -1, // the failed count the dead-letter list was read at
};

// ---- API ----------------------------------------------------------------

async function api(method, path, body) {
  const headers = { "Accept": "application/json" };
  if (method !== "GET") headers["X-CSRF-Token"] = state.csrf;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(path, {
    method, headers, credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  if (res.status !== 204) {
    try { data = await res.json(); } catch (_) { data = null; }
  }
  if (res.status === 401) showLogin("Your session has ended; log in again.");
  if (!res.ok) {
    const msg = data && data.detail ? data.detail : res.statusText;
    throw new Error(msg + " (" + res.status + ")");
  }
  return data;
}

function notice(text, bad) {
  const n = $("#notice");
  n.textContent = text;
  n.classList.toggle("bad", !!bad);
}

// ---- login --------------------------------------------------------------

function showLogin(message) {
  if (state.events) { state.events.close(); state.events = null; }
  $("#main").hidden = true;
  $("#who").hidden = true;
  $("#logout").hidden = true;
  $("#login").hidden = false;
  $("#login-error").textContent = message || "";
  $("#token").focus();
}

function showDashboard(session) {
  state.csrf = session.csrf;
  $("#who-name").textContent = session.name;
  $("#who").hidden = false;
  $("#logout").hidden = false;
  $("#login").hidden = true;
  $("#main").hidden = false;
  connect();
}

$("#login-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const input = $("#token");
  try {
    const res = await fetch("/ui/login", {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "Accept": "application/json" },
      body: JSON.stringify({ token: input.value }),
    });
    const data = await res.json().catch(() => ({}));
    if (!res.ok) {
      $("#login-error").textContent = res.status === 401
        ? "That token was refused: it is not an admin token."
        : (data.detail || "Login failed") + " (" + res.status + ")";
      input.select();
      return;
    }
    input.value = "";
    showDashboard(data);
    $("#main").focus();
  } catch (e) {
    $("#login-error").textContent = "The server did not answer: " + e.message;
  }
});

$("#logout").addEventListener("click", async () => {
  try { await api("POST", "/ui/logout"); } catch (_) { /* logged out anyway */ }
  showLogin("Logged out.");
});

// ---- live data ----------------------------------------------------------

function connect() {
  if (state.events) state.events.close();
  const es = new EventSource("/ui/events");
  state.events = es;
  es.addEventListener("open", () => { $("#conn").textContent = "Live."; });
  es.addEventListener("history", (ev) => {
    const h = JSON.parse(ev.data);
    state.series = new Map(Object.entries(h.series));
  });
  es.addEventListener("snapshot", (ev) => render(JSON.parse(ev.data)));
  es.addEventListener("error", async () => {
    $("#conn").textContent = "Connection lost; reconnecting…";
    // A stream refused for a missing session never recovers by itself.
    try {
      const res = await fetch("/ui/session", { credentials: "same-origin" });
      if (res.status === 401) showLogin("Your session has ended; log in again.");
    } catch (_) { /* the server is away: EventSource retries */ }
  });
}

const fmt = new Intl.NumberFormat("en");
const fmt1 = new Intl.NumberFormat("en", { maximumFractionDigits: 1 });
const fmt3 = new Intl.NumberFormat("en", { maximumFractionDigits: 3 });

function render(snap) {
  $("#conn").textContent = snap.error
    ? "Live, but the last read failed: " + snap.error
    : "Live. Last update " + new Date(snap.at).toLocaleTimeString() + ".";
  const t = Date.parse(snap.at);
  const seen = new Set();
  const body = $("#promos tbody");
  snap.promotions.forEach((p, i) => {
    seen.add(p.id);
    state.promos.set(p.id, p);
    const ser = state.series.get(p.id) || [];
    const wr = p.waiting_room;
    if (!ser.length || ser[ser.length - 1][0] < t) {
      ser.push([t, p.claims_per_second, p.rejected_per_second, null, p.issue_lag_seconds,
        wr ? wr.waiting : null, wr ? wr.admitted_per_second : null, null]);
    }
    while (ser.length && ser[0][0] < t - HISTORY_MS) ser.shift();
    state.series.set(p.id, ser);
    let tr = state.rows.get(p.id);
    if (!tr) {
      tr = makeRow(p);
      state.rows.set(p.id, tr);
    }
    if (body.children[i] !== tr) body.insertBefore(tr, body.children[i] || null);
    updateRow(tr, p);
  });
  for (const [id, tr] of state.rows) {
    if (!seen.has(id)) {
      tr.remove();
      state.rows.delete(id);
      state.promos.delete(id);
      state.series.delete(id);
      if (state.selected === id) select("");
    }
  }
  $("#empty").hidden = snap.promotions.length > 0;
  if (state.selected) renderDetail();
}

const FIELDS = ["state", "stock", "accepted", "pending", "issued", "failed", "remaining",
  "claims_per_second", "rejected_per_second", "issue_lag_seconds", "waiting_room", "consumers"];

function makeRow(p) {
  const tr = document.createElement("tr");
  tr.dataset.promotion = p.id;
  const th = document.createElement("th");
  th.scope = "row";
  const name = document.createElement("span");
  name.textContent = p.id;
  th.append(name);
  if (p.name && p.name !== p.id) {
    const sub = document.createElement("div");
    sub.className = "small";
    sub.textContent = p.name;
    th.append(sub);
  }
  tr.append(th);
  for (const f of FIELDS) {
    const td = document.createElement("td");
    td.dataset.field = f;
    if (!["state", "waiting_room", "consumers"].includes(f)) td.className = "num";
    tr.append(td);
  }
  const act = document.createElement("td");
  act.className = "actions";
  const details = button("Details", "secondary", () => select(p.id));
  details.dataset.action = "details";
  details.setAttribute("aria-label", "Details of " + p.id);
  const close = button("Close", "danger", () => confirmClose(p.id));
  close.dataset.action = "close";
  close.setAttribute("aria-label", "Close " + p.id);
  const pause = button("Pause", "secondary", () => confirmPause(p.id, true));
  pause.dataset.action = "pause";
  pause.setAttribute("aria-label", "Pause " + p.id);
  const resume = button("Resume", "secondary", () => confirmPause(p.id, false));
  resume.dataset.action = "resume";
  resume.setAttribute("aria-label", "Resume " + p.id);
  const report = button("Report", "secondary", () => showReport(p.id));
  report.dataset.action = "report";
  report.setAttribute("aria-label", "Report of " + p.id);
  act.append(details, report, pause, resume, close);
  tr.append(act);
  return tr;
}

function button(text, cls, onclick) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = text;
  if (cls) b.className = cls;
  b.addEventListener("click", onclick);
  return b;
}

function cell(tr, f) { return tr.querySelector('td[data-field="' + f + '"]'); }

function setText(td, text) { if (td.textContent !== text) td.textContent = text; }

// roomText says where the room's users stand: waiting while the promotion
// takes claims, told sold_out or ended once it no longer does.
function roomText(p) {
  const wr = p.waiting_room;
  if (!wr) return "off";
  if (p.state === "sold_out" || p.state === "ended") {
    return fmt.format(wr.waiting) + " told " + p.state.replace("_", " ") + ", " + fmt.format(wr.admitted) + " admitted";
  }
  return fmt.format(wr.waiting) + " waiting, " + fmt1.format(wr.admitted_per_second) + "/s of " + fmt.format(wr.admit_per_second) + "/s";
}

// flag marks a cell that needs a look: a class (colour) and a text
// marker, so it does not rest on colour alone.
function flag(td, on, text) {
  td.classList.toggle("alert", on);
  setText(td, on ? "\u26a0 " + text : text);
  if (on) td.title = td.dataset.field === "failed" ? "dead letters wait for replay or void" : "issue lag over " + LAG_ALERT_S + " s";
  else td.removeAttribute("title");
}

// allowed is the actions p's state offers.
function allowed(p) {
  const takes = (p.state === "open" || p.state === "scheduled") && p.mode !== "grant";
  return { pause: takes && !p.paused, resume: p.paused && p.state !== "ended", close: p.state !== "ended" };
}

function updateRow(tr, p) {
  const st = cell(tr, "state");
  setText(st, p.state.replace("_", " ") + (p.paused ? " (paused)" : "") + (p.drained ? " (drained)" : ""));
  st.className = "state state-" + p.state;
  for (const f of ["stock", "accepted", "pending", "issued"]) setText(cell(tr, f), fmt.format(p[f]));
  flag(cell(tr, "failed"), p.failed > 0, fmt.format(p.failed));
  setText(cell(tr, "remaining"), p.remaining == null ? "—" : fmt.format(p.remaining));
  setText(cell(tr, "claims_per_second"), fmt1.format(p.claims_per_second));
  setText(cell(tr, "rejected_per_second"), fmt1.format(p.rejected_per_second));
  flag(cell(tr, "issue_lag_seconds"), p.issue_lag_seconds > LAG_ALERT_S, fmt1.format(p.issue_lag_seconds) + " s");
  setText(cell(tr, "waiting_room"), roomText(p));
  setText(cell(tr, "consumers"), p.consumers.length
    ? p.consumers.map((c) => c.instance + ": " + c.consumers + (c.pending ? " (" + c.pending + " pending)" : "")).join(", ")
    : "none");
  const ok = allowed(p);
  tr.querySelector('[data-action="pause"]').hidden = !ok.pause;
  tr.querySelector('[data-action="resume"]').hidden = !ok.resume;
  tr.querySelector('[data-action="close"]').hidden = !ok.close;
  tr.classList.toggle("selected", state.selected === p.id);
}

// ---- detail: charts and dead letters ------------------------------------

function select(id) {
  state.selected = id;
  state.dlFailed = -1;
  for (const [rid, tr] of state.rows) tr.classList.toggle("selected", rid === id);
  $("#detail").hidden = !id;
  if (id) {
    $("#detail-title").textContent = "Promotion " + id;
    renderDetail();
  }
}

// loadTimeline reads the database's per-second claims of the last ten
// minutes of the selected promotion: the charts are true for the time no
// page was open, and across instances.
async function loadTimeline(id) {
  state.timeline = { id, at: Date.now(), buckets: state.timeline.id === id ? state.timeline.buckets : [] };
  try {
    const tl = await api("GET", "/v1/promotions/" + encodeURIComponent(id) + "/timeline");
    if (state.selected !== id) return;
    state.timeline.buckets = tl.buckets.map((b) => [Date.parse(b.at), b.accepted, b.issued, b.max_lag_ms / 1000]);
    renderDetail();
  } catch (e) {
    notice("Could not read the timeline: " + e.message, true);
  }
}

function col(ser, k) { return ser.map((pt) => [pt[0], pt[k]]); }

function renderDetail() {
  const p = state.promos.get(state.selected);
  if (!p) return;
  if (state.timeline.id !== p.id || Date.now() - state.timeline.at > TIMELINE_EVERY_MS) loadTimeline(p.id);
  const ser = state.series.get(p.id) || [];
  const db = state.timeline.id === p.id ? state.timeline.buckets : [];
  const end = Date.now(), start = end - HISTORY_MS;
  const claims = mergeSeries(true, col(ser, 1), col(db, 1));
  const rejected = mergeSeries(true, col(ser, 2));
  const issued = mergeSeries(true, col(ser, 3), col(db, 2));
  const lag = mergeSeries(false, col(ser, 4), col(db, 3));
  const last = (pts) => pts.length ? pts[pts.length - 1][1] : 0;
  const peak = drawChart($("#c-claims"), [
    { pts: claims, cls: "l-claims", label: "claims accepted per second" },
    { pts: issued, cls: "l-issued", label: "claims issued per second" },
    { pts: rejected, cls: "l-rejected", label: "claims refused per second" }], start, end, "/s");
  $("#c-claims-cap").textContent = "Claims per second: accepted now " + fmt1.format(last(claims)) + ", refused now " +
    fmt1.format(last(rejected)) + ", peak " + fmt1.format(peak);
  const lagPeak = drawChart($("#c-lag"), [{ pts: lag, cls: "l-lag", label: "issue lag, seconds" }], start, end, "s");
  $("#c-lag-cap").textContent = "Issue lag (seconds): now " + fmt1.format(p.issue_lag_seconds) + ", peak " + fmt3.format(lagPeak);
  $("#c-lag-cap").classList.toggle("alert", p.issue_lag_seconds > LAG_ALERT_S);
  $("#f-room").hidden = !p.waiting_room;
  if (p.waiting_room) {
    drawChart($("#c-room"), [{ pts: col(ser, 5).filter((x) => x[1] != null), cls: "l-waiting", label: "waiting" }], start, end, "");
    drawChart($("#c-admit"), [
      { pts: mergeSeries(true, col(ser, 6)), cls: "l-claims", label: "admitted per second" },
      { pts: mergeSeries(true, col(ser, 7)), cls: "l-rejected", label: "abandoned per second" }], start, end, "/s");
    $("#c-room-cap").textContent = "Waiting room: " + roomText(p);
  }
  if (p.failed !== state.dlFailed) {
    state.dlFailed = p.failed;
    loadDeadLetters(p.id);
  }
}

async function loadDeadLetters(id) {
  let data;
  try {
    data = await api("GET", "/v1/promotions/" + encodeURIComponent(id) + "/dead-letters?limit=100");
  } catch (e) {
    notice("Could not read the dead letters: " + e.message, true);
    return;
  }
  if (state.selected !== id) return;
  const body = $("#dl-table tbody");
  body.replaceChildren();
  for (const d of data.dead_letters) {
    const tr = document.createElement("tr");
    tr.dataset.claim = d.claim_id;
    for (const v of [d.claim_id, d.user_id, d.reason, fmt.format(d.deliveries), new Date(d.at).toLocaleString()]) {
      const td = document.createElement("td");
      td.textContent = v;
      tr.append(td);
    }
    tr.children[3].className = "num";
    const act = document.createElement("td");
    act.className = "actions";
    const rp = button("Replay", "", () => replay(id, [d.claim_id]));
    rp.dataset.action = "replay";
    rp.setAttribute("aria-label", "Replay " + d.claim_id);
    const vd = button("Void", "danger", () => confirmVoid(id, d.claim_id));
    vd.dataset.action = "void";
    vd.setAttribute("aria-label", "Void " + d.claim_id);
    act.append(rp, vd);
    tr.append(act);
    body.append(tr);
  }
  const any = data.dead_letters.length > 0;
  $("#dl").hidden = !any;
  $("#dl-none").hidden = any;
}

$("#replay-all").addEventListener("click", () => replay(state.selected, null));

async function replay(id, claimIDs) {
  try {
    const r = await api("POST", "/v1/promotions/" + encodeURIComponent(id) + "/dead-letters/replay",
      claimIDs ? { claim_ids: claimIDs } : { all: true });
    notice("Replayed " + r.replayed + " dead letter(s) of " + id + ".");
    state.dlFailed = -1;
  } catch (e) {
    notice("Replay failed: " + e.message, true);
  }
}

// ---- search: one user, or one claim --------------------------------------

const enc = encodeURIComponent;

// runLimited runs the tasks, at most n at a time.
async function runLimited(tasks, n) {
  const out = new Array(tasks.length);
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(n, tasks.length) }, async () => {
    while (next < tasks.length) {
      const i = next++;
      out[i] = await tasks[i]().catch((e) => ({ error: e.message }));
    }
  }));
  return out;
}

function resultRow(cells) {
  const tr = document.createElement("tr");
  cells.forEach((v, i) => {
    const td = document.createElement(i === 0 ? "th" : "td");
    if (i === 0) td.scope = "row";
    td.textContent = v == null ? "—" : String(v);
    tr.append(td);
  });
  return tr;
}

// search finds a claim id (<promotion>#<rank>, <promotion>@<user>) with
// GET /v1/claims/{id}; anything else is a user: their claims in every
// promotion on the page and, where there is a room, their standing.
async function search(q) {
  const body = $("#search-table tbody");
  body.replaceChildren();
  $("#search-results").hidden = false;
  $("#search-status").textContent = "Searching…";
  let rows = 0;
  if (/#\d+$/.test(q) || q.includes("@")) {
    try {
      const c = await api("GET", "/v1/claims/" + enc(q));
      body.append(resultRow([c.promotion_id, c.user_id, c.claim.claim_id, c.claim.status,
        c.claim.issued_at ? new Date(c.claim.issued_at).toLocaleString() : null, c.claim.code || null, null]));
      rows++;
    } catch (e) {
      if (/#\d+$/.test(q)) {
        $("#search-status").textContent = "No claim " + q + ": " + e.message;
        return;
      }
    }
  }
  if (!rows) {
    const promos = [...state.promos.values()];
    const found = await runLimited(promos.map((p) => async () => {
      const cl = await api("GET", "/v1/promotions/" + enc(p.id) + "/claims/" + enc(q));
      let standing = null;
      if (p.waiting_room) {
        const st = await api("GET", "/v1/promotions/" + enc(p.id) + "/queue/" + enc(q)).catch(() => null);
        if (st) standing = st.status + (st.position ? " (place " + fmt.format(st.position) + ")" : "");
      }
      return { p, cl, standing };
    }), 6);
    for (const f of found) {
      if (!f || f.error) continue;
      for (const c of f.cl.claims) {
        body.append(resultRow([f.p.id, q, c.claim_id, c.status, c.issued_at ? new Date(c.issued_at).toLocaleString() : null,
          c.code || null, f.standing]));
        rows++;
      }
      if (!f.cl.claims.length && f.standing && f.standing !== "none") {
        body.append(resultRow([f.p.id, q, null, "no claim", null, null, f.standing]));
        rows++;
      }
    }
  }
  $("#search-status").textContent = rows ? rows + " result(s) for " + q + "." : "Nothing found for " + q + " in the promotions shown.";
}

$("#search-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const q = $("#search-q").value.trim();
  if (q) search(q);
});

// ---- report ---------------------------------------------------------------

async function showReport(id) {
  let r;
  try {
    r = await api("GET", "/v1/promotions/" + enc(id) + "/report");
  } catch (e) {
    notice("Could not read the report: " + e.message, true);
    return;
  }
  const sec = $("#report");
  sec.hidden = false;
  $("#report-title").textContent = "Report of " + id;
  const ms = (v) => fmt.format(v) + " ms";
  const when = (v) => v ? new Date(v).toLocaleString() : "—";
  const figures = [
    ["State", r.state], ["Stock", fmt.format(r.stock)], ["Accepted", fmt.format(r.accepted)],
    ["Issued", fmt.format(r.issued)], ["Revoked", fmt.format(r.revoked)], ["Pending", fmt.format(r.pending)],
    ["Refused (this instance)", fmt.format(r.rejected.total) + (r.rejected.total
      ? " — " + Object.entries(r.rejected.by_code).map(([k, v]) => k + " " + fmt.format(v)).join(", ") : "")],
    ["Dead letters", Object.keys(r.dead_letters).length
      ? Object.entries(r.dead_letters).map(([k, v]) => k + " " + fmt.format(v)).join(", ") : "none"],
    ["Sold out", when(r.sold_out_at)], ["First acceptance", when(r.first_accepted_at)],
    ["Last acceptance", when(r.last_accepted_at)], ["Last issue", when(r.last_issued_at)],
    ["Claims/s", "peak " + fmt1.format(r.claims_per_second.peak) + ", mean " + fmt1.format(r.claims_per_second.mean)],
    ["Issue lag", "p50 " + ms(r.issue_lag.p50_ms) + ", p99 " + ms(r.issue_lag.p99_ms) + ", max " + ms(r.issue_lag.max_ms)],
  ];
  if (r.waiting_room) {
    const w = r.waiting_room;
    figures.push(["Waiting room", fmt.format(w.joins) + " joined, " + fmt.format(w.admitted) + " admitted, " +
      fmt.format(w.abandoned) + " abandoned, " + fmt.format(w.waiting) + " never reached"]);
  }
  const body = $("#report-table tbody");
  body.replaceChildren(...figures.map((f) => resultRow(f)));
  const bs = r.claims_per_second.buckets, w = r.claims_per_second.bucket_seconds * 1000;
  // Each bucket is a step over its width.
  const steps = (sel) => bs.flatMap((b) => { const t = Date.parse(b.at); return [[t, sel(b)], [t + w - 1, sel(b)]]; });
  const pts = steps((b) => b.accepted / r.claims_per_second.bucket_seconds);
  const lag = steps((b) => b.issued > 0 ? b.max_lag_ms / 1000 : null);
  const start = bs.length ? Date.parse(bs[0].at) : Date.now() - 60e3;
  const end = bs.length ? Date.parse(bs[bs.length - 1].at) + w : Date.now();
  drawChart($("#c-report"), [{ pts, cls: "l-claims", label: "claims accepted per second" }], start, end, "/s");
  drawChart($("#c-report-lag"), [{ pts: lag, cls: "l-lag", label: "longest issue lag, seconds" }], start, end, "s");
  $("#report-notes").replaceChildren(...r.notes.map((n) => { const li = document.createElement("li"); li.textContent = n; return li; }));
  sec.scrollIntoView();
  $("#report-title").focus();
}

$("#report-close").addEventListener("click", () => { $("#report").hidden = true; });

// ---- confirmations ------------------------------------------------------

// The dialog's close event comes in a task of its own, so a dialog shown
// again at once can see the close event of its earlier showing arrive while
// it is open. One listener answers the showing that waits: an event that
// finds the dialog open is an earlier showing's and is ignored, and a
// showing whose event had not come yet is answered when the next one opens.
let confirmWaiting = null;

function answerConfirm() {
  const w = confirmWaiting;
  confirmWaiting = null;
  if (w.opener && w.opener.focus) w.opener.focus();
  w.resolve($("#confirm").returnValue === "ok");
}

$("#confirm").addEventListener("close", () => {
  if ($("#confirm").open || !confirmWaiting) return;
  answerConfirm();
});

function confirmDialog(title, text, ok) {
  const d = $("#confirm");
  if (confirmWaiting) answerConfirm();
  $("#confirm-title").textContent = title;
  $("#confirm-text").textContent = text;
  $("#confirm-ok").textContent = ok;
  const opener = document.activeElement;
  return new Promise((resolve) => {
    confirmWaiting = { resolve, opener };
    d.returnValue = "";
    d.showModal();
  });
}

async function confirmClose(id) {
  const yes = await confirmDialog("Close " + id + "?",
    "Closing ends the promotion now: no further claim is accepted. Claims already accepted are still issued. This cannot be undone.",
    "Close promotion");
  if (!yes) return;
  try {
    const p = await api("POST", "/v1/promotions/" + encodeURIComponent(id) + "/close");
    notice("Closed " + id + " (state: " + p.state + ").");
  } catch (e) {
    notice("Close failed: " + e.message, true);
  }
}

async function confirmPause(id, pause) {
  const yes = await confirmDialog((pause ? "Pause " : "Resume ") + id + "?",
    pause
      ? "Pausing stops new claims on every instance at once (they answer 409 paused); claims already accepted are still issued. Resume it from here."
      : "Resuming lets claims in again on every instance.",
    pause ? "Pause claims" : "Resume claims");
  if (!yes) return;
  try {
    const p = await api("PATCH", "/v1/promotions/" + encodeURIComponent(id), { paused: pause });
    notice((p.paused ? "Paused " : "Resumed ") + id + ".");
  } catch (e) {
    notice((pause ? "Pause" : "Resume") + " failed: " + e.message, true);
  }
}

async function confirmVoid(id, claimID) {
  const yes = await confirmDialog("Void " + claimID + "?",
    "Voiding gives up on this claim for good and returns its unit to stock. The user gets nothing for it.",
    "Void claim");
  if (!yes) return;
  try {
    const r = await api("POST", "/v1/promotions/" + encodeURIComponent(id) + "/dead-letters/void", { claim_ids: [claimID] });
    notice("Voided " + r.voided + " claim(s) of " + id + ".");
    state.dlFailed = -1;
  } catch (e) {
    notice("Void failed: " + e.message, true);
  }
}

// ---- start --------------------------------------------------------------

(async () => {
  try {
    const res = await fetch("/ui/session", { credentials: "same-origin" });
    if (res.ok) {
      showDashboard(await res.json());
      return;
    }
  } catch (_) { /* fall through to the login */ }
  showLogin("");
})();
