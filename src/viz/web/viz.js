// lazygrad VIZ explorer: lists the recorded groups and passes, draws a pass's UOp graph with
// dagre's layout at any step of its rewrites, and shows the kernel's generated code.
// URL parameters g (group), p (pass) and s (step) select what is shown; step 0 is the graph
// before the pass, step k the graph after its k-th rewrite.
"use strict";

const MAX_DRAWN_NODES = 2500;
const $ = (id) => document.getElementById(id);
let trace = null;
const view = { g: 0, p: 0, s: 0 };

// ---- the trace ----

const node = (id) => trace.nodes[id]; // [op, dtype, arg, src]

function reachable(root) {
  const seen = new Set([root]);
  const stack = [root];
  while (stack.length) {
    for (const s of node(stack.pop())[3]) {
      if (!seen.has(s)) { seen.add(s); stack.push(s); }
    }
  }
  return seen;
}

function changes(pass) {
  return pass.steps.length > 0 || pass.before !== pass.after;
}

// The graph root at each step: before, then after each rewrite (or only before and after when
// the pass was too large for its intermediate graphs to be kept).
function stepRoots(pass) {
  const roots = [pass.before];
  if (pass.steps.length && pass.steps.every((s) => s[3] !== null)) roots.push(...pass.steps.map((s) => s[3]));
  else if (pass.after !== pass.before) roots.push(pass.after);
  return roots;
}

function codeOf(g) {
  for (let i = g; i !== null; i = trace.groups[i].parent) {
    if (trace.groups[i].code !== null) return trace.groups[i].code;
  }
  return null;
}

// ---- side lists ----

function groupDepth(g) {
  let d = 0;
  for (let i = trace.groups[g].parent; i !== null; i = trace.groups[i].parent) d++;
  return d;
}

function renderGroups() {
  const box = $("groups");
  box.innerHTML = "";
  trace.groups.forEach((grp, g) => {
    const changed = grp.passes.filter(changes).length;
    if (grp.passes.length === 0 && grp.code === null) return;
    const el = document.createElement("div");
    el.className = "item" + (g === view.g ? " selected" : "");
    el.style.paddingLeft = 8 + 12 * groupDepth(g) + "px";
    el.innerHTML = `#${g} ${escapeHtml(grp.name)} <span class="count">${changed}/${grp.passes.length}</span>`;
    el.onclick = () => select(g, firstChangingPass(g), null);
    box.appendChild(el);
  });
}

function renderPasses() {
  const box = $("passes");
  const showAll = $("showall").checked;
  box.innerHTML = "";
  trace.groups[view.g].passes.forEach((pass, p) => {
    if (!showAll && !changes(pass) && p !== view.p) return;
    const el = document.createElement("div");
    el.className = "item" + (p === view.p ? " selected" : "") + (changes(pass) ? "" : " unchanged");
    el.style.paddingLeft = 8 + 12 * pass.depth + "px";
    el.innerHTML = `${escapeHtml(pass.name)} <span class="count">${pass.steps.length}</span>`;
    el.onclick = () => select(view.g, p, null);
    box.appendChild(el);
  });
}

function renderSteps(pass) {
  const box = $("steps");
  box.innerHTML = "";
  const label = (k, text) => {
    const el = document.createElement("div");
    el.className = "item" + (k === view.s ? " selected" : "");
    el.textContent = text;
    el.onclick = () => select(view.g, view.p, k);
    box.appendChild(el);
  };
  label(0, "0  before the pass");
  const full = stepRoots(pass).length === pass.steps.length + 1;
  pass.steps.forEach((st, i) => {
    const text = `${i + 1}  ${node(st[0])[0]} → ${node(st[1])[0]}   ${trace.rules[st[2]]}`;
    if (full) label(i + 1, text);
    else box.appendChild(Object.assign(document.createElement("div"), { className: "item", textContent: text }));
  });
  if (!full && pass.after !== pass.before) label(1, "1  after the pass");
}

// ---- the graph ----

function escapeHtml(s) {
  return String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
}

function labelLines(id) {
  const [op, dtype, arg] = node(id);
  const lines = [op, dtype];
  if (arg !== "") lines.push(arg.length > 48 ? arg.slice(0, 45) + "..." : arg);
  return lines;
}

// Lay out and draw the graph at `root`; `changed` nodes are outlined, `focus` (the rewrite's
// result) more strongly.
function drawGraph(root, changed, focus) {
  const svg = $("graph");
  const ids = [...reachable(root)];
  svg.dataset.graph = root;
  svg.dataset.nodes = ids.length;
  if (ids.length > MAX_DRAWN_NODES) {
    svg.innerHTML = "";
    $("notice").textContent = `This graph has ${ids.length} nodes, more than the ${MAX_DRAWN_NODES} drawn; use the DOT link.`;
    return;
  }
  $("notice").textContent = "";
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: "TB", nodesep: 14, ranksep: 26, marginx: 10, marginy: 10 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const id of ids) {
    const lines = labelLines(id);
    const width = 12 + 6.2 * Math.max(...lines.map((l) => l.length));
    g.setNode(String(id), { width, height: 8 + 12 * lines.length, lines });
  }
  for (const id of ids) for (const s of node(id)[3]) g.setEdge(String(s), String(id));
  dagre.layout(g);

  const parts = [
    '<defs><marker id="arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="7" markerHeight="7" orient="auto">' +
      '<path d="M0,0 L8,4 L0,8 z" fill="#888"/></marker></defs>',
  ];
  for (const e of g.edges()) {
    const pts = g.edge(e).points.map((p) => `${p.x.toFixed(1)},${p.y.toFixed(1)}`);
    parts.push(`<path class="edge" marker-end="url(#arrow)" d="M${pts.join(" L")}"/>`);
  }
  for (const id of ids) {
    const n = g.node(String(id));
    const cls = "node" + (changed.has(id) ? " changed" : "") + (id === focus ? " focus" : "");
    const x = n.x - n.width / 2, y = n.y - n.height / 2;
    const text = n.lines
      .map((l, i) => `<tspan x="${n.x}" y="${y + 14 + 12 * i}"${i === 0 ? ' font-weight="bold"' : ""}>${escapeHtml(l)}</tspan>`)
      .join("");
    parts.push(
      `<g class="${cls}" data-id="${id}"><title>node ${id}: ${escapeHtml(node(id).slice(0, 3).join(" "))}</title>` +
        `<rect x="${x}" y="${y}" width="${n.width}" height="${n.height}" rx="4" fill="${trace.colors[node(id)[0]] || "#fff"}"/>` +
        `<text text-anchor="middle">${text}</text></g>`,
    );
  }
  svg.innerHTML = parts.join("");
  // bounds of the nodes and of the edges' routes (which may pass outside the nodes)
  const xs = [], ys = [];
  for (const id of ids) {
    const n = g.node(String(id));
    xs.push(n.x - n.width / 2, n.x + n.width / 2);
    ys.push(n.y - n.height / 2, n.y + n.height / 2);
  }
  for (const e of g.edges()) for (const p of g.edge(e).points) xs.push(p.x), ys.push(p.y);
  const bounds = { x: Math.min(...xs) - 10, y: Math.min(...ys) - 10 };
  bounds.w = Math.max(...xs) + 10 - bounds.x;
  bounds.h = Math.max(...ys) + 10 - bounds.y;
  fitView(bounds, g.node(String(focus ?? root)));
}

// ---- pan and zoom (the SVG viewBox) ----

let box = { x: 0, y: 0, w: 1, h: 1 };
function setBox(b) {
  box = b;
  $("graph").setAttribute("viewBox", `${b.x} ${b.y} ${b.w} ${b.h}`);
}
// Show the whole graph if it stays readable, else a readable window around `center`.
const MIN_SCALE = 0.7;
function fitView(bounds, center) {
  const r = $("graph").getBoundingClientRect();
  const pw = r.width || 800, ph = r.height || 600;
  const W = Math.max(bounds.w, (bounds.h * pw) / ph);
  if (pw / W >= MIN_SCALE) return setBox({ x: bounds.x + (bounds.w - W) / 2, y: bounds.y, w: W, h: (W * ph) / pw });
  const vw = pw / MIN_SCALE, vh = ph / MIN_SCALE;
  setBox({ x: center.x - vw / 2, y: center.y - vh / 2, w: vw, h: vh });
}
function installPanZoom() {
  const svg = $("graph");
  svg.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    const r = svg.getBoundingClientRect();
    const k = ev.deltaY > 0 ? 1.15 : 1 / 1.15;
    const fx = box.x + (box.w * (ev.clientX - r.left)) / r.width, fy = box.y + (box.h * (ev.clientY - r.top)) / r.height;
    setBox({ x: fx - (fx - box.x) * k, y: fy - (fy - box.y) * k, w: box.w * k, h: box.h * k });
  }, { passive: false });
  let drag = null;
  svg.addEventListener("mousedown", (ev) => (drag = { x: ev.clientX, y: ev.clientY, box }));
  window.addEventListener("mouseup", () => (drag = null));
  window.addEventListener("mousemove", (ev) => {
    if (!drag) return;
    const r = svg.getBoundingClientRect();
    const dx = ((ev.clientX - drag.x) * box.w) / r.width, dy = ((ev.clientY - drag.y) * box.h) / r.height;
    setBox({ ...drag.box, x: drag.box.x - dx, y: drag.box.y - dy });
  });
}

// ---- selection ----

function firstChangingPass(g) {
  const i = trace.groups[g].passes.findIndex(changes);
  return i < 0 ? 0 : i;
}

function select(g, p, s) {
  const grp = trace.groups[g];
  const pass = grp.passes[p];
  view.g = g;
  view.p = p;
  renderGroups();
  renderPasses();
  const code = codeOf(g);
  $("code").textContent = code === null ? "(this group did not generate code)" : code;
  if (!pass) {
    view.s = 0;
    $("title").textContent = `#${g} ${grp.name}: no passes`;
    $("graph").innerHTML = "";
    $("steps").innerHTML = "";
    return;
  }
  const roots = stepRoots(pass);
  view.s = s === null ? roots.length - 1 : Math.max(0, Math.min(s, roots.length - 1));
  $("title").textContent = `#${g} ${grp.name} / ${pass.name}`;
  $("slider").max = roots.length - 1;
  $("slider").value = view.s;
  renderSteps(pass);
  const root = roots[view.s];
  const prev = view.s > 0 ? roots[view.s - 1] : null;
  let changed = new Set(), focus = null, info = `step 0/${roots.length - 1}: before`;
  if (prev !== null) {
    const old = reachable(prev);
    changed = new Set([...reachable(root)].filter((n) => !old.has(n)));
    const full = roots.length === pass.steps.length + 1;
    if (full) {
      const st = pass.steps[view.s - 1];
      focus = st[1];
      info = `step ${view.s}/${roots.length - 1}: ${node(st[0])[0]} → ${node(st[1])[0]} by ${trace.rules[st[2]]}`;
    } else {
      info = `after all ${pass.steps.length} rewrites`;
    }
  }
  $("stepinfo").textContent = info;
  $("dot").href = `dot?root=${root}` + (prev !== null ? `&prev=${prev}` : "");
  drawGraph(root, changed, focus);
  document.body.dataset.ready = "1";
  history.replaceState(null, "", `?g=${view.g}&p=${view.p}&s=${view.s}`);
}

// The last kernel whose codegen changed its graph, else the first group that changed anything.
function defaultGroup() {
  const isKernel = (grp) => grp.name.startsWith("kernel") && grp.passes.some(changes);
  const k = trace.groups.findLastIndex(isKernel);
  if (k >= 0) return k;
  const any = trace.groups.findIndex((grp) => grp.passes.some(changes));
  return Math.max(any, 0);
}

async function main() {
  trace = await (await fetch("trace.json")).json();
  if (trace.groups.length === 0) {
    $("notice").textContent = "Nothing was recorded (was VIZ=1 set when the program ran?).";
    document.body.dataset.ready = "1";
    return;
  }
  const q = new URLSearchParams(location.search);
  const num = (k) => (q.has(k) && !isNaN(parseInt(q.get(k))) ? parseInt(q.get(k)) : null);
  const g = Math.min(num("g") ?? defaultGroup(), trace.groups.length - 1);
  const p = num("p") ?? firstChangingPass(g);
  installPanZoom();
  $("prev").onclick = () => select(view.g, view.p, view.s - 1);
  $("next").onclick = () => select(view.g, view.p, view.s + 1);
  $("slider").oninput = (ev) => select(view.g, view.p, parseInt(ev.target.value));
  $("showall").onchange = renderPasses;
  window.addEventListener("keydown", (ev) => {
    if (ev.key === "ArrowLeft") select(view.g, view.p, view.s - 1);
    if (ev.key === "ArrowRight") select(view.g, view.p, view.s + 1);
  });
  select(g, p, num("s"));
}

main();
