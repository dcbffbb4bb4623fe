// kubesched ui: the page's script. Plain DOM, no library; every byte ships in the package.
"use strict";

const PAGE = 200; // explain rows rendered at a time (5,000 nodes stay responsive)
const state = {
  cluster: null,
  pods: [],          // the pods of the loaded simulation, or of the last what-if
  changed: new Set(),
  selected: null,
  explain: null,     // {pod, plugins, rows}
  zoneOf: new Map(),
  sort: { col: "total", dir: -1 },
  limit: PAGE,
  profile: null,
  podYaml: "",
};

const $ = (id) => document.getElementById(id);
const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({
  "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));

async function getJSON(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: ${r.status} ${await r.text()}`);
  return r.json();
}

function colour(frac) {
  // green (free) to red (full), through yellow
  const f = Math.max(0, Math.min(1, frac));
  return `hsl(${Math.round(120 * (1 - f))}, 70%, ${f > 1 - 1e-9 ? 42 : 55}%)`;
}

function fraction(node, metric) {
  const [used, cap] = node[metric];
  return cap > 0 ? used / cap : 1;
}

function renderGrid() {
  const metric = $("metric").value;
  const big = state.cluster.nodes <= 60;
  const html = state.cluster.zones.map((z) => {
    const tiles = z.nodes.map((n) => {
      const cls = ["node"];
      if (big) cls.push("big");
      if (state.cluster.nodes > 1000) cls.push("small");
      if (n.taints.length) cls.push("tainted");
      if (n.cordoned) cls.push("cordoned");
      const pct = Math.round(100 * fraction(n, metric));
      const title = `${n.name}: ${metric} ${pct}%` +
        (n.taints.length ? `, taints ${n.taints.join(", ")}` : "") +
        (n.cordoned ? ", cordoned" : "") + `, ${n.pods.length} pods`;
      const label = big ? `${esc(n.name)}<br>${pct}%` : "";
      return `<div class="${cls.join(" ")}" data-node="${esc(n.name)}" ` +
        `style="background-color:${colour(fraction(n, metric))}" title="${esc(title)}">${label}</div>`;
    }).join("");
    return `<div class="zone"><h3>${esc(z.name)} <span class="muted">(${z.nodes.length} nodes)</span></h3>` +
      `<div class="tiles">${tiles}</div></div>`;
  }).join("");
  $("grid").innerHTML = html;
  $("legend").innerHTML = `<i style="background:${colour(0)}"></i>free` +
    `<i style="background:${colour(0.5)}"></i>half` +
    `<i style="background:${colour(1)}"></i>full` +
    `<i style="box-shadow:inset 0 0 0 2px #6a3fb5"></i>tainted` +
    `<i style="background-image:repeating-linear-gradient(45deg,#555 0 2px,transparent 2px 5px)"></i>cordoned`;
  highlight();
}

function highlight() {
  const grid = $("grid");
  const rows = state.explain ? state.explain.rows : [];
  const feasible = new Set(rows.filter((r) => r.feasible).map((r) => r.node));
  const chosen = state.explain ? state.explain.pod.node : null;
  grid.classList.toggle("dim", !!state.explain);
  for (const el of grid.querySelectorAll(".node")) {
    el.classList.toggle("feasible", feasible.has(el.dataset.node));
    el.classList.toggle("chosen", el.dataset.node === chosen);
  }
}

function nodeInfo(name) {
  for (const z of state.cluster.zones) {
    const n = z.nodes.find((x) => x.name === name);
    if (!n) continue;
    const cpu = n.cpu.map((v) => (v / 1000).toFixed(1));
    const mem = n.memory.map((v) => (v / 2 ** 30).toFixed(1));
    $("node-info").innerHTML = `<b>${esc(n.name)}</b> (${esc(z.name)}): CPU ${cpu[0]}/${cpu[1]}, ` +
      `memory ${mem[0]}/${mem[1]} GiB` +
      (n.taints.length ? `; taints: ${esc(n.taints.join(", "))}` : "") +
      (n.cordoned ? "; <b>cordoned</b>" : "") +
      `<br>pods: ${n.pods.map((p) => esc(p.key) + (p.simulated ? " (placed by the simulation)" : "")).join(", ") || "none"}`;
  }
}

function renderPods() {
  const q = $("pod-filter").value.toLowerCase();
  $("pods").innerHTML = state.pods
    .filter((p) => !q || p.key.toLowerCase().includes(q) || (p.node || p.reason).toLowerCase().includes(q))
    .map((p) => {
      const cls = [];
      if (!p.node) cls.push("unschedulable");
      if (p.key === state.selected) cls.push("selected");
      if (state.changed.has(p.key)) cls.push("changed");
      const where = p.node || p.reason;
      return `<li class="${cls.join(" ")}" data-pod="${esc(p.key)}" title="${esc(p.message)}">` +
        `<span>${esc(p.key)}</span><span class="where">${esc(where)}</span></li>`;
    }).join("");
}

async function select(key) {
  state.selected = key;
  state.limit = PAGE;
  renderPods();
  let explain, yaml;
  try {
    [explain, yaml] = await Promise.all([
      getJSON(`/api/explain?pod=${encodeURIComponent(key)}`),
      fetch(`/api/pod-yaml?pod=${encodeURIComponent(key)}`).then((r) => (r.ok ? r.text() : "")),
    ]);
  } catch (e) {
    $("pod-panel").hidden = false;
    $("pod-title").textContent = key;
    $("pod-outcome").innerHTML = `<span class="error">${esc(e.message)}</span>`;
    return;
  }
  state.podYaml = yaml;
  $("pod-yaml").value = yaml;
  showExplain(explain);
  $("why").innerHTML = "";
  if (!explain.pod.node && explain.pod.reason === "Unschedulable") loadWhy(key);
}

function showExplain(explain) {
  state.explain = explain;
  const p = explain.pod;
  $("pod-panel").hidden = false;
  $("pod-title").textContent = p.key;
  const victims = p.victims && p.victims.length ? ` after preempting ${p.victims.join(", ")}` : "";
  $("pod-outcome").innerHTML = p.node
    ? `goes to <span id="pick">${esc(p.node)}</span>${esc(victims)}`
    : `<span id="pick">${esc(p.reason)}</span>: ${esc(p.message)}`;
  renderTable();
  highlight();
}

async function loadWhy(key) {
  $("why").innerHTML = `<span class="muted">asking every plugin about every node…</span>`;
  try {
    const w = await getJSON(`/api/why?pod=${encodeURIComponent(key)}`);
    if (state.selected !== key) return;
    const rej = w.rejections.map((r) => `<li><b>${esc(r.plugin)}</b> rejects ${r.any} node(s)` +
      ` (first on ${r.first}): ${esc(Object.entries(r.reasons).map(([k, v]) => `${k} (${v})`).join(", "))}</li>`).join("");
    const ways = w.waysOut.map((x) => `<li>${esc(x.text)}</li>`).join("") ||
      "<li class=muted>none found</li>";
    $("why").innerHTML = `<h3>Why</h3><ul>${rej}</ul><h3>Ways out (each checked)</h3><ul class="ways">${ways}</ul>`;
  } catch (e) {
    $("why").innerHTML = `<span class="error">${esc(e.message)}</span>`;
  }
}

function columns() {
  const plugins = state.explain.plugins;
  return [
    { key: "node", label: "node" },
    { key: "zone", label: "zone" },
    { key: "plugin", label: "rejected by" },
    { key: "reason", label: "reason" },
    { key: "total", label: "total", num: true },
    ...plugins.map((p) => ({ key: "s:" + p, label: p, num: true, score: true })),
  ];
}

function cell(row, key) {
  if (key === "zone") return state.zoneOf.get(row.node) || "";
  if (key.startsWith("s:")) return row.scores[key.slice(2)];
  return row[key];
}

function renderTable() {
  const cols = columns();
  const q = $("row-filter").value.toLowerCase();
  const only = $("feasible-only").checked;
  let rows = state.explain.rows.filter((r) => (!only || r.feasible) &&
    (!q || r.node.toLowerCase().includes(q) || r.plugin.toLowerCase().includes(q) ||
      r.reason.toLowerCase().includes(q) || (state.zoneOf.get(r.node) || "").includes(q)));
  const { col, dir } = state.sort;
  rows = rows.slice().sort((a, b) => {
    let x = cell(a, col), y = cell(b, col);
    if (x === undefined || x === null) x = col === "node" ? "" : -Infinity;
    if (y === undefined || y === null) y = col === "node" ? "" : -Infinity;
    if (x < y) return -dir;
    if (x > y) return dir;
    return a.node < b.node ? -1 : a.node > b.node ? 1 : 0;
  });
  const chosen = state.explain.pod.node;
  $("explain").tHead.innerHTML = "<tr>" + cols.map((c) => {
    const s = [c.key === col ? (dir > 0 ? "sorted-asc" : "sorted-desc") : "", c.score ? "score" : ""].join(" ");
    return `<th data-col="${esc(c.key)}" class="${s}" title="${esc(c.label)}">${esc(c.label)}</th>`;
  }).join("") + "</tr>";
  $("explain").tBodies[0].innerHTML = rows.slice(0, state.limit).map((r) => {
    const cls = [r.feasible ? "feasible" : "", r.node === chosen ? "chosen" : ""].join(" ");
    return `<tr class="${cls}" data-node="${esc(r.node)}">` + cols.map((c) => {
      const v = cell(r, c.key);
      const text = v === undefined || v === null ? "" : v;
      const k = c.key === "reason" ? "reason" : c.num ? "num" : "";
      return `<td class="${k}">${esc(c.key === "plugin" && r.feasible ? "ok" : text)}</td>`;
    }).join("") + "</tr>";
  }).join("");
  $("row-count").textContent = `${Math.min(rows.length, state.limit)} of ${rows.length} rows` +
    (rows.length !== state.explain.rows.length ? ` (${state.explain.rows.length} nodes)` : "");
  $("more").hidden = rows.length <= state.limit;
}

function renderWeights() {
  const profile = state.profile.profiles[0];
  $("weights").tBodies[0].innerHTML = profile.plugins.map((p) =>
    `<tr><td><input type="checkbox" data-plugin="${esc(p.name)}" checked></td><td>${esc(p.name)}</td>` +
    `<td>${p.weight === null ? "" : `<input type="number" min="0" max="100" data-weight="${esc(p.name)}" value="${p.weight}">`}</td></tr>`
  ).join("");
  $("config-yaml").value = state.profile.yaml;
}

async function runWhatIf() {
  const body = { target: state.selected };
  const pod = $("pod-yaml").value;
  if (state.selected && pod !== state.podYaml) body.pod = pod;
  const config = $("config-yaml").value;
  if (config !== state.profile.yaml) body.config = config;
  body.weights = {};
  for (const input of document.querySelectorAll("[data-weight]")) {
    const p = state.profile.profiles[0].plugins.find((x) => x.name === input.dataset.weight);
    if (p && Number(input.value) !== p.weight) body.weights[input.dataset.weight] = Number(input.value);
  }
  body.disabled = [...document.querySelectorAll("[data-plugin]")]
    .filter((c) => !c.checked).map((c) => c.dataset.plugin);
  $("whatif-result").innerHTML = `<span class="muted">simulating…</span>`;
  let r, doc;
  try {
    r = await fetch("/api/what-if", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    doc = await r.json();
  } catch (e) {
    $("whatif-result").innerHTML = `<div class="error">${esc(e.message)}</div>`;
    return;
  }
  if (!r.ok) {
    $("whatif-result").innerHTML = `<div class="error">${esc(doc.error)}</div>`;
    return;
  }
  const before = new Map(state.pods.map((p) => [p.key, p.node || p.reason]));
  state.pods = doc.pods;
  state.changed = new Set(doc.pods.filter((p) => before.get(p.key) !== (p.node || p.reason)).map((p) => p.key));
  if (doc.target) state.selected = doc.target;
  renderPods();
  const was = doc.before ? doc.before.node || doc.before.reason : "(new pod)";
  const now = doc.after ? doc.after.pod.node || doc.after.pod.reason : "";
  $("whatif-result").innerHTML = (doc.target ? `<p id="whatif-pick">${esc(doc.target)}: ${esc(was)} → <b>${esc(now)}</b></p>` : "") +
    `<p>${state.changed.size} pod(s) placed differently.</p>` +
    doc.issues.map((i) => `<div class="error">${esc(i)}</div>`).join("");
  if (doc.after) {
    showExplain(doc.after);
    $("why").innerHTML = "";
  }
}

async function reset() {
  state.pods = await getJSON("/api/pods");
  state.changed = new Set();
  renderWeights();
  $("whatif-result").innerHTML = "";
  renderPods();
  if (state.selected) await select(state.selected);
}

async function pollQueue() {
  try {
    const q = await getJSON("/api/queue");
    if (!q.connected) {
      $("queue").innerHTML = `<span class="muted">${esc(q.reason)}</span>`;
      return;
    }
    const counts = Object.entries(q.counts).map(([k, v]) => `${k} ${v}`).join(" · ");
    const items = q.pods.map((p) => {
      const facts = [p.queue, p.attempts === undefined ? "" : `${p.attempts} tries`,
        (p.unschedulablePlugins || []).length ? `rejected by ${p.unschedulablePlugins.join(", ")}` : "",
        p.gatedBy ? `gated by ${p.gatedBy}` : "",
        p.retryInSeconds === undefined ? "" : `retry in ${p.retryInSeconds.toFixed(1)} s`];
      return `<li data-queued="${esc(p.namespace + "/" + p.name)}"><b>${esc(p.namespace)}/${esc(p.name)}</b>` +
        `<br><span class="muted">${esc(facts.filter(Boolean).join(" · "))}</span></li>`;
    }).join("");
    $("queue").innerHTML = `<div>${esc(counts)}</div><ul class="queued">${items}</ul>`;
  } catch (e) {
    $("queue").innerHTML = `<span class="error">${esc(e.message)}</span>`;
  } finally {
    setTimeout(pollQueue, 2000);
  }
}

async function main() {
  const [cluster, pods, profile] = await Promise.all([
    getJSON("/api/cluster"), getJSON("/api/pods"), getJSON("/api/profile")]);
  state.cluster = cluster;
  state.pods = pods;
  state.profile = profile;
  for (const z of cluster.zones) for (const n of z.nodes) state.zoneOf.set(n.name, z.name);
  $("source").textContent = cluster.source;
  const s = cluster.summary;
  $("summary").textContent = `${cluster.nodes} nodes, ${cluster.running} pods running, ` +
    Object.entries(s).map(([k, v]) => `${v} ${k}`).join(", ") + ` (simulated in ${cluster.seconds}s)`;
  renderGrid();
  renderPods();
  renderWeights();
  $("metric").addEventListener("change", renderGrid);
  $("pod-filter").addEventListener("input", renderPods);
  $("pods").addEventListener("click", (e) => {
    const li = e.target.closest("li[data-pod]");
    if (li) select(li.dataset.pod);
  });
  $("grid").addEventListener("click", (e) => {
    const el = e.target.closest("[data-node]");
    if (el) nodeInfo(el.dataset.node);
  });
  $("row-filter").addEventListener("input", () => { state.limit = PAGE; renderTable(); });
  $("feasible-only").addEventListener("change", () => { state.limit = PAGE; renderTable(); });
  $("explain").tHead.addEventListener("click", (e) => {
    const th = e.target.closest("th[data-col]");
    if (!th) return;
    const col = th.dataset.col;
    state.sort = { col, dir: state.sort.col === col ? -state.sort.dir : (col === "node" || col === "zone" || col === "plugin" || col === "reason" ? 1 : -1) };
    renderTable();
  });
  $("more").addEventListener("click", () => { state.limit += 5 * PAGE; renderTable(); });
  $("run").addEventListener("click", runWhatIf);
  $("reset").addEventListener("click", reset);
  document.body.dataset.ready = "true";
  pollQueue();
}

main().catch((e) => {
  document.body.insertAdjacentHTML("afterbegin", `<div class="error">${esc(e.message)}</div>`);
});
