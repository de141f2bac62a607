// The dibs dashboard: plain JavaScript, no libraries, nothing loaded from
// elsewhere. Live data comes from /ui/events (server-sent events); actions
// call the admin JSON API with the session cookie and the CSRF token.
"use strict";

const $ = (sel) => document.querySelector(sel);
const HISTORY_POINTS = 600; // ten minutes at one snapshot a second

const state = {
  csrf: "",
  events: null,
  promos: new Map(), // id -> last snapshot entry
  rows: new Map(), // id -> <tr>
  series: new Map(), // id -> [[unix_ms, claims/s, lag s, admitted/s], ...]
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
    if (!ser.length || ser[ser.length - 1][0] < t) ser.push([t, p.claims_per_second, p.issue_lag_seconds, p.waiting_room ? p.waiting_room.admitted_per_second : 0]);
    if (ser.length > HISTORY_POINTS) ser.splice(0, ser.length - HISTORY_POINTS);
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
  "claims_per_second", "issue_lag_seconds", "waiting_room", "consumers"];

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
  const pause = button("Pause", "secondary", () => confirmPause(p.id, !(state.promos.get(p.id) || p).paused));
  pause.dataset.action = "pause";
  act.append(details, pause, close);
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

function updateRow(tr, p) {
  const st = cell(tr, "state");
  setText(st, p.state.replace("_", " "));
  st.className = "state state-" + p.state;
  for (const f of ["stock", "accepted", "pending", "issued", "failed"]) setText(cell(tr, f), fmt.format(p[f]));
  setText(cell(tr, "remaining"), p.remaining == null ? "—" : fmt.format(p.remaining));
  setText(cell(tr, "claims_per_second"), fmt1.format(p.claims_per_second));
  setText(cell(tr, "issue_lag_seconds"), fmt1.format(p.issue_lag_seconds) + " s");
  const wr = p.waiting_room;
  setText(cell(tr, "waiting_room"), wr
    ? fmt.format(wr.waiting) + " waiting, " + fmt1.format(wr.admitted_per_second) + "/s of " + fmt.format(wr.admit_per_second) + "/s"
    : "off");
  setText(cell(tr, "consumers"), p.consumers.length
    ? p.consumers.map((c) => c.instance + ": " + c.consumers + (c.pending ? " (" + c.pending + " pending)" : "")).join(", ")
    : "none");
  tr.querySelector('[data-action="close"]').disabled = p.state === "ended";
  const pause = tr.querySelector('[data-action="pause"]');
  setText(pause, p.paused ? "Resume" : "Pause");
  pause.setAttribute("aria-label", (p.paused ? "Resume " : "Pause ") + p.id);
  pause.disabled = p.state === "ended" || p.mode === "grant";
  if (p.paused) setText(st, p.state.replace("_", " ") + " (paused)");
  tr.classList.toggle("selected", state.selected === p.id);
}

// ---- detail: charts and dead letters ------------------------------------

function select(id) {
  state.selected = id;
  state.dlFailed = -1;
  for (const [rid, tr] of state.rows) tr.classList.toggle("selected", rid === id);
  $("#detail").hidden = !id;
  if (id) {
    renderDetail();
    $("#detail-title").textContent = "Promotion " + id;
  }
}

function renderDetail() {
  const p = state.promos.get(state.selected);
  if (!p) return;
  const ser = state.series.get(p.id) || [];
  chart("#c-claims", "#c-claims-cap", "Claims per second", ser, 1);
  chart("#c-lag", "#c-lag-cap", "Issue lag (seconds)", ser, 2);
  $("#f-admit").hidden = !p.waiting_room;
  if (p.waiting_room) chart("#c-admit", "#c-admit-cap", "Waiting room admissions per second", ser, 3);
  if (p.failed !== state.dlFailed) {
    state.dlFailed = p.failed;
    loadDeadLetters(p.id);
  }
}

// chart draws column k of ser as a line over the last ten minutes.
function chart(svgSel, capSel, title, ser, k) {
  const svg = $(svgSel);
  const W = 600, H = 160;
  const end = ser.length ? ser[ser.length - 1][0] : Date.now();
  // The last ten minutes, or less while less is known (at least a minute).
  const first = ser.length ? ser[0][0] : end;
  const start = Math.max(end - HISTORY_POINTS * 1000, Math.min(first, end - 60000));
  let top = 0;
  for (const pt of ser) top = Math.max(top, pt[k]);
  const scale = top > 0 ? top * 1.1 : 1;
  const pts = ser.filter((pt) => pt[0] >= start)
    .map((pt) => ((pt[0] - start) / (end - start) * W).toFixed(1) + "," + (H - pt[k] / scale * H).toFixed(1));
  const last = ser.length ? ser[ser.length - 1][k] : 0;
  $(capSel).textContent = title + ": now " + fmt1.format(last) + ", peak " + fmt1.format(top) + " (last " + Math.round((end - start) / 60000) + " min)";
  const ns = "http://www.w3.org/2000/svg";
  svg.replaceChildren();
  for (const y of [H / 4, H / 2, 3 * H / 4]) {
    const l = document.createElementNS(ns, "line");
    l.setAttribute("class", "grid");
    l.setAttribute("x1", 0); l.setAttribute("x2", W); l.setAttribute("y1", y); l.setAttribute("y2", y);
    svg.append(l);
  }
  const pl = document.createElementNS(ns, "polyline");
  pl.setAttribute("class", "line");
  pl.setAttribute("points", pts.join(" "));
  svg.append(pl);
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

// ---- confirmations ------------------------------------------------------

function confirmDialog(title, text, ok) {
  const d = $("#confirm");
  $("#confirm-title").textContent = title;
  $("#confirm-text").textContent = text;
  $("#confirm-ok").textContent = ok;
  const opener = document.activeElement;
  return new Promise((resolve) => {
    d.addEventListener("close", () => {
      if (opener && opener.focus) opener.focus();
      resolve(d.returnValue === "ok");
    }, { once: true });
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
