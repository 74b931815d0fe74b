// The dashboard: reads the status feed (server-sent events from /v2/weir/status/stream, one
// document a second), draws the chosen graph as SVG once per structure, and updates each node's
// figures, replica liveness and mechanism state on every document. Pages are chosen by the URL
// fragment: #graph/<name> or #repository. Every string from the server is set as text, never
// parsed as markup.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const BOX = { w: 230, h: 96, gapX: 56, gapY: 22, pad: 16 };
let doc = null;
let drawn = null; // the structure key of the graph drawn

function el(tag, attrs, text) {
  const e = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function fmt(v, digits) {
  if (v === null || v === undefined) return "–";
  if (typeof v !== "number") return String(v);
  return v.toFixed(digits === undefined ? 1 : digits);
}

function page() {
  const h = decodeURIComponent(location.hash.replace(/^#/, ""));
  if (h === "repository") return { kind: "repository" };
  if (h.startsWith("graph/")) return { kind: "graph", name: h.slice(6) };
  return { kind: "graph", name: null };
}

function tabs() {
  const nav = document.getElementById("tabs");
  const want = doc.graphs.map((g) => "graph/" + g.name);
  if (doc.modelless) want.push("repository");
  const have = Array.from(nav.children).map((a) => a.dataset.page);
  if (have.join("\n") !== want.join("\n")) {
    nav.replaceChildren(...want.map((p) => {
      const a = el("a", { href: "#" + encodeURIComponent(p).replace("%2F", "/"), "data-page": p },
        p === "repository" ? "repository" : p.slice(6));
      return a;
    }));
  }
  const p = page();
  const current = p.kind === "repository" ? "repository" : "graph/" + (p.name || (doc.graphs[0] || {}).name);
  for (const a of nav.children) a.classList.toggle("current", a.dataset.page === current);
}

function structureKey(g) {
  return JSON.stringify([g.name, g.nodes.map((n) => [n.id, n.kind, (n.replicas || []).map((r) => r.name)]), g.edges]);
}

function nodeClass(n) {
  return "node " + n.kind + (n.fan_out ? " fan-out" : "");
}

function draw(g) {
  const svg = document.getElementById("graph");
  const ids = ["ingress", ...g.nodes.map((n) => n.id), "egress"];
  const layout = weirLayout(ids, g.edges, BOX);
  svg.setAttribute("viewBox", `0 0 ${layout.width} ${layout.height}`);
  svg.style.height = Math.min(layout.height, 640) + "px";
  // Ingress and egress are narrow boxes at the inner edge of their slot.
  const IO = 120;
  const left = (id) => layout.pos[id].x + (id === "ingress" ? BOX.w - IO : 0);
  const width = (id) => (id === "ingress" || id === "egress" ? IO : BOX.w);
  const parts = [];
  for (const e of g.edges) {
    const a = layout.pos[e.from], b = layout.pos[e.to];
    if (!a || !b) continue;
    const x1 = left(e.from) + width(e.from), y1 = a.y + BOX.h / 2, x2 = left(e.to), y2 = b.y + BOX.h / 2;
    const mid = (x1 + x2) / 2;
    parts.push(el("svg:path", {
      class: "edge" + (e.kind === "parts" ? " parts" : ""),
      d: `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}`,
      "data-from": e.from, "data-to": e.to,
    }));
  }
  const byId = new Map(g.nodes.map((n) => [n.id, n]));
  for (const id of ids) {
    const p = layout.pos[id];
    const n = byId.get(id);
    const grp = el("svg:g", { class: n ? nodeClass(n) : "node io", "data-node": id, transform: `translate(${left(id)},${p.y})` });
    grp.appendChild(el("svg:rect", { class: "box", width: width(id), height: BOX.h }));
    const title = n ? `${id} · ${n.kind}${n.fan_out ? " · fan-out" : ""}${n.join ? " · join" : ""}` : id;
    grp.appendChild(el("svg:text", { class: "title", x: 8, y: 17 }, title));
    if (n) {
      const label = el("svg:text", { class: "small", x: 8, y: 33 }, n.label.length > 38 ? n.label.slice(0, 37) + "…" : n.label);
      label.appendChild(el("svg:title", {}, n.label));
      grp.appendChild(label);
      grp.appendChild(el("svg:text", { class: "figures", x: 8, y: 51, "data-node": id }));
      grp.appendChild(el("svg:text", { class: "small mech", x: 8, y: 68, "data-node": id }));
      (n.replicas || []).forEach((r, i) => {
        const x = 12 + i * 54;
        grp.appendChild(el("svg:circle", { class: "replica", cx: x, cy: 84, r: 5, "data-node": id, "data-replica": r.name, "data-alive": "unknown" }));
        grp.appendChild(el("svg:text", { class: "small", x: x + 8, y: 88 }, r.name.length > 6 ? r.name.slice(0, 6) : r.name));
      });
    } else {
      const names = id === "ingress" ? g.inputs : g.outputs.map((o) => o.name);
      names.slice(0, 4).forEach((name, i) => grp.appendChild(el("svg:text", { class: "small", x: 8, y: 35 + 15 * i }, name)));
    }
    parts.push(grp);
  }
  svg.replaceChildren(...parts);
  const body = document.querySelector("#nodes tbody");
  body.replaceChildren(...g.nodes.map((n) => {
    const tr = el("tr", { "data-node": n.id });
    tr.appendChild(el("td", {}, n.id));
    tr.appendChild(el("td", {}, n.kind));
    for (const c of ["rows_per_s", "jobs_per_s", "queue_depth", "mean_batch", "call_p50_ms", "call_p99_ms", "errors", "expired"]) {
      tr.appendChild(el("td", { class: c }));
    }
    tr.appendChild(el("td", { class: "mech" }));
    return tr;
  }));
  // One row per replica of a node with a remote replica.
  const rows = [];
  for (const n of g.nodes) {
    const rs = n.replicas || [];
    if (!rs.some((r) => r.remote)) continue;
    for (const r of rs) {
      const tr = el("tr", { "data-node": n.id, "data-replica": r.name });
      tr.appendChild(el("td", {}, n.id));
      tr.appendChild(el("td", {}, r.name + (r.remote ? "" : " (local)")));
      for (const c of REPLICA_COLUMNS) tr.appendChild(el("td", { class: c }));
      rows.push(tr);
    }
  }
  const table = document.getElementById("replicas");
  table.querySelector("tbody").replaceChildren(...rows);
  table.hidden = rows.length === 0;
}

const REPLICA_COLUMNS = ["alive", "heard_ms", "outstanding", "dispatched", "queue_depth", "in_flight", "rows_per_s", "served", "errors", "device"];

// A replica's row: the pool's view of it, then what its executor last reported of itself.
function replicaRow(n, r) {
  const tr = document.querySelector(`#replicas tr[data-node="${CSS.escape(n.id)}"][data-replica="${CSS.escape(r.name)}"]`);
  if (!tr) return;
  const x = r.executor || {};
  const cells = {
    alive: r.alive === undefined ? "–" : r.alive ? "alive" : "down",
    heard_ms: r.heard_ago_s === undefined ? "–" : fmt(r.heard_ago_s * 1000, 0),
    outstanding: fmt(r.outstanding, 0), dispatched: fmt(r.dispatched, 0),
    queue_depth: fmt(x.queue_depth, 0), in_flight: fmt(x.in_flight, 0), rows_per_s: fmt(x.rows_per_s),
    served: fmt(x.served, 0), errors: fmt(x.errors, 0), device: fmt(x.device),
  };
  for (const c of REPLICA_COLUMNS) tr.querySelector("." + c).textContent = cells[c];
  tr.classList.toggle("down", r.alive === false);
}

function mechanism(n) {
  const out = [];
  if (n.kind === "gather" && n.live) {
    const l = n.live;
    out.push(`joins ${l.joined} of ${l.parts} parts, ${l.waiting} waiting, mean wait ${fmt(l.mean_wait_ms, 2)} ms, ${l.failed} failed, ${l.dropped} dropped`);
  }
  if (n.serf) out.push(`SERF ${n.serf.concurrency}×${n.serf.threads}, predicted ${fmt(n.serf.predicted_ms, 2)} ms / measured ${fmt(n.serf.measured_ms, 2)} ms, ${n.serf.switches} switches`);
  if (n.routing === "kairos" && n.shares_by_type) {
    out.push("Kairos " + Object.entries(n.shares_by_type).map(([t, s]) => `${t} ${(100 * s).toFixed(0)}%`).join(" "));
  }
  if (n.parm) out.push(`ParM k=${n.parity.k}: ${n.parm.reconstructed} reconstructed of ${n.parm.groups} groups`);
  if (n.hams) out.push(`HAMS epoch ${n.hams.epoch}, primary ${n.hams.primary || "none"}, backup ${n.hams.backups.join(" ") || "none"}, durable lag ${n.hams.durable_lag}`);
  return out.join("; ");
}

function update(g) {
  const live = g.live;
  const head = document.getElementById("graph-live");
  head.replaceChildren(
    el("span", {}, "requests/s "), el("b", { id: "requests-per-s" }, fmt(live.requests_per_s)),
    el("span", {}, "in flight "), el("b", { id: "in-flight" }, `${live.in_flight} / ${live.max_in_flight}`),
    el("span", {}, "answered "), el("b", { id: "answered" }, String(live.answered)));
  for (const n of g.nodes) {
    const l = n.live || {};
    const fig = document.querySelector(`text.figures[data-node="${CSS.escape(n.id)}"]`);
    if (fig) {
      fig.textContent = n.kind === "model"
        ? `${fmt(l.rows_per_s ?? l.jobs_per_s)}/s · q ${fmt(l.queue_depth, 0)} · p99 ${fmt(l.call_p99_ms, 2)} ms`
        : n.kind === "op" && n.live
          ? `${fmt(l.rows_per_s)} rows/s · batch ${fmt(l.mean_batch, 1)} · ${fmt(l.errors, 0)} errors`
          : n.kind === "gather" && n.live
            ? `${fmt(l.joined_per_s)} joins/s · ${fmt(l.waiting, 0)} waiting · wait ${fmt(l.mean_wait_ms, 2)} ms`
            : "";
    }
    const mech = document.querySelector(`text.mech[data-node="${CSS.escape(n.id)}"]`);
    if (mech) {
      mech.textContent = n.hams ? `primary ${n.hams.primary || "none"} · epoch ${n.hams.epoch}`
        : n.serf ? `SERF ${n.serf.concurrency}×${n.serf.threads}`
        : n.parm ? `ParM ${n.parm.reconstructed} rebuilt`
        : n.routing === "kairos" ? "Kairos" : (n.routing && n.routing !== "least_outstanding" ? n.routing : "");
    }
    for (const r of n.replicas || []) {
      const c = document.querySelector(`circle.replica[data-node="${CSS.escape(n.id)}"][data-replica="${CSS.escape(r.name)}"]`);
      if (c) {
        c.setAttribute("data-alive", r.alive === undefined ? "unknown" : String(r.alive));
        const x = r.executor;
        const own = x ? `; its executor: heard ${fmt(r.heard_ago_s * 1000, 0)} ms ago, queue ${fmt(x.queue_depth, 0)}, holds ${fmt(x.in_flight, 0)}, ${fmt(x.served, 0)} served, ${fmt(x.errors, 0)} errors` : "";
        c.replaceChildren(el("svg:title", {}, `${r.name}${r.remote ? " (remote" + (r.instance_type ? ", " + r.instance_type : "") + ")" : " (local)"}: ${r.alive === false ? "down" : "alive"}, ${r.outstanding ?? 0} outstanding, ${r.dispatched ?? "–"} dispatched${own}`));
      }
      replicaRow(n, r);
    }
    const tr = document.querySelector(`#nodes tr[data-node="${CSS.escape(n.id)}"]`);
    if (!tr) continue;
    const set = (c, v, d) => { tr.querySelector("." + c).textContent = fmt(v, d); };
    // A gather's rows are the requests it joined; its queue, the joins waiting for parts.
    set("rows_per_s", l.rows_per_s ?? l.joined_per_s); set("jobs_per_s", l.jobs_per_s);
    set("queue_depth", l.queue_depth ?? l.waiting, 0);
    set("mean_batch", l.mean_batch, 2); set("call_p50_ms", l.call_p50_ms, 2); set("call_p99_ms", l.call_p99_ms, 2);
    set("errors", l.errors, 0); set("expired", l.expired, 0);
    const down = (n.replicas || []).filter((r) => r.alive === false).map((r) => r.name);
    const m = tr.querySelector(".mech");
    m.textContent = [mechanism(n), down.length ? `down: ${down.join(" ")}` : ""].filter(Boolean).join("; ");
    m.classList.toggle("down", down.length > 0);
  }
  pathIds(g);
  const f = document.getElementById("failovers");
  f.replaceChildren();
  if (g.failovers && g.failovers.length) {
    f.appendChild(el("h3", {}, "Recent failovers"));
    const ul = el("ul");
    for (const r of g.failovers) {
      ul.appendChild(el("li", { "data-node": r.node }, `${r.node}: ${r.reason} (${fmt(r.ago_s, 0)} s ago, protocol ${fmt(r.protocol_ms, 1)} ms, ${r.retried} retried)`));
    }
    f.appendChild(ul);
  }
}

// The "request path" panel: the newest ids the graph kept (from the status document) as links;
// one clicked, or typed, is fetched from /v2/weir/requests/<id> and drawn as one bar per hop.
let shownPath = null;

function pathIds(g) {
  const box = document.getElementById("path-ids");
  const ids = (g.paths && g.paths.recent) || [];
  const have = Array.from(box.children).map((a) => a.dataset.request);
  if (have.join("\n") !== ids.join("\n")) {
    box.replaceChildren(...ids.map((id) => {
      const a = el("a", { href: "#", class: "path-id", "data-request": id }, id);
      a.addEventListener("click", (e) => { e.preventDefault(); showPath(id); });
      return a;
    }));
  }
  for (const a of box.children) a.classList.toggle("current", a.dataset.request === shownPath);
  if (!ids.length && !shownPath) {
    const note = document.getElementById("path-note");
    note.className = "note";
    note.textContent = g.paths && g.paths.every ? `one request in ${g.paths.every} is kept` : "no request paths are kept";
  }
}

async function showPath(id) {
  const note = document.getElementById("path-note");
  const svg = document.getElementById("path-timeline");
  id = id.trim();
  document.getElementById("path-id").value = id;
  if (!/^[A-Za-z0-9._:-]{1,128}$/.test(id)) {
    note.className = "note error";
    note.textContent = "an id is 1 to 128 of A-Z a-z 0-9 . _ : -";
    svg.replaceChildren();
    return;
  }
  let body;
  try {
    const r = await fetch("/v2/weir/requests/" + encodeURIComponent(id), { cache: "no-store", credentials: "same-origin" });
    body = await r.json();
    if (!r.ok) throw new Error(body.error || String(r.status));
  } catch (e) {
    note.className = "note error";
    note.textContent = String(e.message || e);
    svg.replaceChildren();
    shownPath = null;
    return;
  }
  shownPath = id;
  note.className = "note";
  note.textContent = `${body.id} on ${body.graph}: ${body.hops.length} hops, ${fmt(body.duration_ms, 2)} ms, ${body.rows} row${body.rows === 1 ? "" : "s"}${body.truncated ? " (cut)" : ""}`;
  timeline(body);
}

function timeline(p) {
  const svg = document.getElementById("path-timeline");
  const W = 1000, LABEL = 150, ROW = 22, TOP = 18, RIGHT = 300;
  const span = Math.max(p.duration_ms, ...p.hops.map((h) => h.start_ms + h.duration_ms), 0.001);
  const x = (ms) => LABEL + (W - LABEL - RIGHT) * ms / span;
  const parts = [el("svg:line", { class: "axis", x1: LABEL, y1: TOP - 4, x2: W - RIGHT, y2: TOP - 4 })];
  parts.push(el("svg:text", { class: "small", x: LABEL, y: TOP - 7 }, "0 ms"));
  parts.push(el("svg:text", { class: "small", x: W - RIGHT, y: TOP - 7, "text-anchor": "end" }, `${fmt(span, 2)} ms`));
  p.hops.forEach((h, i) => {
    const y = TOP + i * ROW;
    const cls = "hop" + (h.measured ? "" : " inferred") + (h.remote ? " remote" : "");
    const g = el("svg:g", { class: cls, "data-node": h.node, "data-seq": String(h.seq) });
    g.appendChild(el("svg:text", { class: "title", x: 4, y: y + 14 }, h.node.length > 20 ? h.node.slice(0, 19) + "…" : h.node));
    const bar = el("svg:rect", { class: "bar", x: x(h.start_ms), y: y + 3, width: Math.max(2, x(h.start_ms + h.duration_ms) - x(h.start_ms)), height: ROW - 7, rx: 2 });
    const detail = [`+${fmt(h.start_ms, 2)} ms`, `${fmt(h.duration_ms, 2)} ms`];
    if (h.batch_size !== null && h.batch_size !== undefined) detail.push(`batch ${h.batch_size}`);
    if (h.replica) detail.push(h.replica + (h.remote ? " (remote)" : ""));
    else if (h.measured) detail.push(h.remote ? "remote" : "local");
    if (h.inputs > 1) detail.push(`joins ${h.inputs}`);
    const more = [];
    if (h.queue_wait_ms !== null && h.queue_wait_ms !== undefined) more.push(`queued ${fmt(h.queue_wait_ms, 2)} ms`);
    if (h.run_ms !== null && h.run_ms !== undefined) more.push(`ran ${fmt(h.run_ms, 2)} ms`);
    if (!h.measured) more.push("timed from its neighbours");
    bar.appendChild(el("svg:title", {}, `${h.node} batch ${h.seq}: ${detail.concat(more).join(", ")}`));
    g.appendChild(bar);
    g.appendChild(el("svg:text", { class: "small detail", x: W - RIGHT + 8, y: y + 14 }, detail.join(" · ")));
    parts.push(g);
  });
  svg.setAttribute("viewBox", `0 0 ${W} ${TOP + p.hops.length * ROW + 4}`);
  svg.replaceChildren(...parts);
}

document.getElementById("path-form").addEventListener("submit", (e) => {
  e.preventDefault();
  showPath(document.getElementById("path-id").value);
});

function repository(m) {
  const root = document.getElementById("repository");
  root.replaceChildren(el("p", {}, "Workers' hardware: " + m.hardware.join(", ")));
  for (const t of m.tasks) {
    const sec = el("div", { class: "task", "data-task": t.name });
    sec.appendChild(el("h3", {}, "task " + t.name));
    for (const v of t.variants) {
      const row = el("div", { class: "variant", "data-variant": v.name });
      row.appendChild(el("b", {}, v.name));
      row.appendChild(el("span", {}, ` · ${v.hardware} · accuracy ${fmt(v.accuracy, 3)} · ${fmt(v.latency_ms_batch_1, 2)} ms at batch 1 · batch ≤ ${v.max_batch} · `));
      if (!v.instances.length) row.appendChild(el("span", { class: "state" }, "inactive"));
      for (const i of v.instances) row.appendChild(el("span", { class: "state " + i.state, "data-worker": i.worker }, `${i.worker}: ${i.state}`));
      sec.appendChild(row);
    }
    root.appendChild(sec);
  }
  const actions = m.autoscaler || [];
  root.appendChild(el("h3", {}, "Autoscaler's recent actions"));
  if (!actions.length) {
    root.appendChild(el("p", { class: "note", id: "autoscaler-none" }, "none yet"));
  } else {
    const ul = el("ul", { id: "autoscaler" });
    for (const a of actions) {
      ul.appendChild(el("li", { class: a.ok ? "" : "down", "data-action": a.action },
        `${a.action} ${a.target}${a.result ? (a.ok ? " → " : ": ") + a.result : ""} (${fmt(a.ago_s, 0)} s ago)`));
    }
    root.appendChild(ul);
  }
}

function render() {
  if (!doc) return;
  document.getElementById("sample").textContent = String(doc.sample);
  tabs();
  const p = page();
  const gv = document.getElementById("graph-view"), rv = document.getElementById("repository-view");
  if (p.kind === "repository" && doc.modelless) {
    gv.hidden = true; rv.hidden = false;
    repository(doc.modelless);
    return;
  }
  rv.hidden = true;
  const g = doc.graphs.find((x) => x.name === p.name) || doc.graphs[0];
  document.getElementById("empty").hidden = !!g || !!doc.modelless;
  if (!g) { gv.hidden = true; if (doc.modelless) { rv.hidden = false; repository(doc.modelless); } return; }
  gv.hidden = false;
  const key = structureKey(g);
  if (key !== drawn) { draw(g); drawn = key; }
  update(g);
}

function connect() {
  const feed = document.getElementById("feed");
  const source = new EventSource("/v2/weir/status/stream");
  source.onopen = () => { feed.dataset.state = "live"; feed.textContent = "live"; };
  source.onmessage = (e) => {
    doc = JSON.parse(e.data);
    render();
  };
  source.onerror = () => { feed.dataset.state = "lost"; feed.textContent = "reconnecting…"; };
}

window.addEventListener("hashchange", () => { drawn = null; render(); });
connect();
