// trainplan ui: sends every change to POST /api/plan and draws what comes back.
// Nothing is computed here; the numbers are those of `trainplan plan`.
"use strict";

const STAGE_COLOURS = {
  accelerator: "var(--accelerator)", decode: "var(--decode)", read: "var(--read)",
  tokenize: "var(--tokenize)", transfer: "var(--transfer)",
};
const BILL_PARTS = [
  ["bytes", "data movement (storage + transfer)", "var(--bytes)"],
  ["cores", "CPU cores", "var(--cores)"],
  ["idle_accelerator", "idle accelerator", "var(--idle)"],
];
const SVG_NS = "http://www.w3.org/2000/svg";

const $ = (id) => document.getElementById(id);
let defaults = {};
let accelerators = [];
let params = 93e6;          // model.params as sent; the log slider only moves it
let changes = 0;            // every input event counts one
let inflight = false;
let dirty = false;

// ---------------------------------------------------------------- formatting

function siCount(x) {
  const steps = [[1e12, "T"], [1e9, "B"], [1e6, "M"], [1e3, "k"]];
  for (const [scale, prefix] of steps) {
    if (Math.abs(x) >= scale) return `${+(x / scale).toPrecision(3)} ${prefix}`;
  }
  return `${+x.toPrecision(3)}`;
}
function dollars(x) {
  if (x === null || x === undefined) return "—";
  return x < 10 ? `$${x.toFixed(3)}` : `$${x.toLocaleString("en-US", { maximumFractionDigits: 2 })}`;
}
function percent(fraction) { return `${(fraction * 100).toFixed(1)} %`; }
function number(x, digits = 1) {
  if (x === null || x === undefined) return "—";
  return x.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
}
function roundSignificant(x, digits) { return Number(x.toPrecision(digits)); }

// ---------------------------------------------------------------- controls

function settings() {
  const [width, height] = $("resolution").value.split("x").map(Number);
  return {
    "data.cameras": Number($("cameras").value),
    "data.width": width,
    "data.height": height,
    "data.fps": Number($("fps").value),
    "data.access": $("access").value,
    "model.params": params,
    "cluster.accelerator": $("accelerator").value,
    "cluster.cores": Number($("cores").value),
    "cluster.nvdec": $("nvdec").checked,
    "prices.accelerator_hour": Number($("accelerator-hour").value),
    "prices.core_hour": Number($("core-hour").value),
  };
}

function showControlValues() {
  $("cameras-value").textContent = $("cameras").value;
  $("fps-value").textContent = `${$("fps").value} /s`;
  $("params-value").textContent = siCount(params);
  $("cores-value").textContent = $("cores").value;
  $("accelerator-hour-value").textContent = `$${Number($("accelerator-hour").value).toFixed(2)}`;
  $("core-hour-value").textContent = `$${Number($("core-hour").value).toFixed(3)}`;
  const acc = accelerators.find((a) => a.key === $("accelerator").value);
  const engines = acc ? acc.video_decoders : 0;
  $("nvdec-engines").textContent = `(${engines} engine${engines === 1 ? "" : "s"})`;
}

function option(value, text) {
  const o = document.createElement("option");
  o.value = value;
  o.textContent = text;
  return o;
}

function applyDefaults() {
  $("cameras").value = defaults["data.cameras"];
  $("resolution").value = `${defaults["data.width"]}x${defaults["data.height"]}`;
  $("fps").value = defaults["data.fps"];
  $("access").value = defaults["data.access"];
  params = defaults["model.params"];
  $("params").value = Math.log10(params);
  $("accelerator").value = defaults["cluster.accelerator"];
  $("cores").value = defaults["cluster.cores"];
  $("nvdec").checked = defaults["cluster.nvdec"];
  $("accelerator-hour").value = defaults["prices.accelerator_hour"];
  $("core-hour").value = defaults["prices.core_hour"];
}

function changed(event) {
  if (event && event.target && event.target.id === "params") {
    params = roundSignificant(10 ** Number($("params").value), 2);
  }
  changes += 1;
  document.body.dataset.changes = String(changes);
  showControlValues();
  dirty = true;
  if (!inflight) send();
}

// ---------------------------------------------------------------- requests

// The workload the sliders apply to: an uploaded file's text, one of the files given to
// `trainplan ui` (by name), or the built-in default. The page never sends a file path.
let uploaded = null;
function base() {
  if (uploaded !== null) return { config: uploaded };
  return $("base").value ? { workload: $("base").value } : {};
}

async function send() {
  dirty = false;
  inflight = true;
  const asked = changes;
  try {
    const response = await fetch("/api/plan", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ set: settings(), ...base() }),
    });
    const data = await response.json();
    if (response.ok) {
      render(data);
      showError(null);
    } else {
      showError(typeof data.detail === "string" ? data.detail : `error ${response.status}`);
    }
  } catch (err) {
    showError(`trainplan ui is not answering (${err})`);
  } finally {
    inflight = false;
    if (dirty) {
      send();
    } else {
      document.body.dataset.shown = String(asked);
    }
  }
}

function showError(message) {
  const el = $("error");
  el.hidden = !message;
  el.textContent = message || "";
  document.body.classList.toggle("has-error", Boolean(message));
}

// ---------------------------------------------------------------- rendering

function render(report) {
  const p = report.pipeline;
  const b = report.bill;
  // the verdict and the planning decisions' sentences, as the CLI and the HTML report write them
  const said = (report.decisions && report.decisions.sentences) || [];
  $("verdict").textContent = [report.verdict, ...said].join(" ");

  const busy = $("busy");
  busy.textContent = percent(p.busy);
  busy.dataset.value = String(p.busy);

  const bottleneck = $("bottleneck");
  bottleneck.textContent = p.bottleneck;
  bottleneck.className = "value " + p.bottleneck;

  const needed = $("cores-needed");
  needed.textContent = p.cores_needed === null ? "—" : number(p.cores_needed, 1);
  needed.dataset.value = String(p.cores_needed);
  needed.title = `${number(p.cores, 0)} present`;

  const total = $("bill-total");
  total.textContent = dollars(b.total);
  total.dataset.value = String(b.total);
  renderBill(b);
  renderDetails(report);
  if (report.series) renderPlot(report.series, p);
}

function renderBill(b) {
  const bar = $("bill-bar");
  const list = $("bill-split");
  bar.replaceChildren();
  list.replaceChildren();
  for (const [key, label, colour] of BILL_PARTS) {
    const share = b.total > 0 ? b[key] / b.total : 0;
    const seg = document.createElement("span");
    seg.className = key;
    seg.style.width = `${(share * 100).toFixed(2)}%`;
    seg.title = `${label}: ${dollars(b[key])}`;
    bar.append(seg);
    const li = document.createElement("li");
    li.id = `bill-${key.replace("_", "-")}`;
    li.style.setProperty("--swatch", colour);
    li.textContent = `${label} ${dollars(b[key])} (${(share * 100).toFixed(0)} %)`;
    list.append(li);
  }
  if (b.per_epochs && b.per_epochs["10"] !== undefined) {
    const li = document.createElement("li");
    li.id = "bill-ten-epochs";
    li.className = "plain";
    li.textContent = `over ten epochs ${dollars(b.per_epochs["10"])}`;
    list.append(li);
  }
}

// The figures of the details table, by JSON key: labels and texts come from the server's
// `display` (planning/figures.py and the CLI's formatter), so the page reads as the CLI does.
const DETAIL_FIGURES = [
  "pipeline.demand_fps", "pipeline.supply_fps", "pipeline.tokens_per_frame", "pipeline.pixels_per_token",
  "pipeline.threshold_params", "pipeline.stored_bytes_per_hour", "pipeline.decoded_bytes_per_hour",
  "workload.accelerator_name",
];

function renderDetails(report) {
  const display = report.display || {};
  const body = $("details").tBodies[0];
  body.replaceChildren();
  for (const key of DETAIL_FIGURES) {
    const figure = display[key];
    if (!figure || figure.text === "n/a") continue;  // a figure this workload does not have
    const tr = body.insertRow();
    tr.insertCell().textContent = figure.label;
    tr.insertCell().textContent = figure.text;
  }
}

function svg(tag, attrs, text) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  if (text !== undefined) el.textContent = text;
  return el;
}

function niceStep(range, ticks) {
  const raw = range / ticks;
  const mag = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * mag >= raw) return m * mag;
  return 10 * mag;
}

function renderPlot(series, p) {
  const plot = $("plot");
  plot.replaceChildren();
  const W = 640, H = 300, left = 48, right = 16, top = 16, bottom = 40;
  const xs = series.cores;
  const xmax = xs[xs.length - 1] || 1;
  const X = (c) => left + (c / xmax) * (W - left - right);
  const Y = (f) => top + (1 - f) * (H - top - bottom);

  for (const f of [0, 0.25, 0.5, 0.75, 1]) {
    plot.append(svg("line", { class: "grid", x1: left, x2: W - right, y1: Y(f), y2: Y(f) }));
    plot.append(svg("text", { x: left - 6, y: Y(f) + 4, "text-anchor": "end" }, `${f * 100} %`));
  }
  const step = niceStep(xmax, 8);
  for (let c = 0; c <= xmax + 1e-9; c += step) {
    plot.append(svg("line", { class: "grid", x1: X(c), x2: X(c), y1: top, y2: H - bottom }));
    plot.append(svg("text", { x: X(c), y: H - bottom + 14, "text-anchor": "middle" }, `${c}`));
  }
  plot.append(svg("line", { class: "axis", x1: left, x2: W - right, y1: H - bottom, y2: H - bottom }));
  plot.append(svg("line", { class: "axis", x1: left, x2: left, y1: top, y2: H - bottom }));
  plot.append(svg("text", { x: (left + W - right) / 2, y: H - 6, "text-anchor": "middle" }, "CPU cores per accelerator"));

  // the curve, one polyline per run of the same binding stage
  let run = [], stage = null;
  const flush = () => {
    if (run.length > 1) {
      plot.append(svg("polyline", {
        points: run.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(" "),
        fill: "none", stroke: STAGE_COLOURS[stage] || "var(--muted)", "stroke-width": 2.5,
        "data-stage": stage,
      }));
    }
  };
  xs.forEach((c, i) => {
    const f = series.busy[i];
    if (f === null) return;
    const pt = [X(c), Y(f)];
    if (series.bottleneck[i] !== stage) {
      flush();
      run = run.length ? [run[run.length - 1]] : [];
      stage = series.bottleneck[i];
    }
    run.push(pt);
  });
  flush();

  // cores needed, if in view
  if (p.cores_needed !== null && p.cores_needed <= xmax) {
    const x = X(p.cores_needed);
    plot.append(svg("line", { id: "plot-needed", class: "needed", x1: x, x2: x, y1: top, y2: H - bottom }));
    const end = x > W * 0.8;
    plot.append(svg("text", { x: end ? x - 4 : x + 4, y: Y(0.5), "text-anchor": end ? "end" : "start" },
      `${number(p.cores_needed, 1)} cores needed`));
  }

  // legend of the stages that appear
  const seen = [...new Set(series.bottleneck)];
  seen.forEach((s, i) => {
    const x = W - right - 110, y = H - bottom - 14 - (seen.length - 1 - i) * 14;
    plot.append(svg("rect", { x, y: y - 8, width: 10, height: 4, fill: STAGE_COLOURS[s] || "var(--muted)" }));
    plot.append(svg("text", { x: x + 14, y: y - 4 }, `${s} binds`));
  });

  // the current point
  const cx = X(Math.min(p.cores, xmax)), cy = Y(p.busy);
  plot.append(svg("circle", { id: "plot-point", class: "point", cx, cy, r: 6 }));
  const anchor = cx > W * 0.75 ? "end" : "start";
  plot.append(svg("text", { class: "point-label", x: cx + (anchor === "end" ? -10 : 10), y: cy < top + 20 ? cy + 18 : cy - 10,
    "text-anchor": anchor }, `${number(p.cores, 0)} cores: ${percent(p.busy)}`));
}

// ---------------------------------------------------------------- start

async function start() {
  try {
    const response = await fetch("/api/options");
    const opts = await response.json();
    defaults = opts.defaults;
    accelerators = opts.accelerators;
    for (const r of opts.resolutions) $("resolution").append(option(`${r.width}x${r.height}`, `${r.label} (${r.width}×${r.height})`));
    for (const a of opts.access) $("access").append(option(a, a === "decoded" ? "decoded (pre-decoded frames)" : a));
    for (const a of opts.accelerators) $("accelerator").append(option(a.key, a.name));
    for (const w of opts.workloads || []) $("base").append(option(w, w));
  } catch (err) {
    showError(`trainplan ui is not answering (${err})`);
    return;
  }
  applyDefaults();
  for (const el of document.querySelectorAll("#controls input, #controls select")) {
    el.addEventListener("input", changed);  // range, select and checkbox all fire "input"
  }
  $("reset").addEventListener("click", () => { applyDefaults(); changed(null); });
  $("base").addEventListener("input", () => { uploaded = null; $("upload").value = ""; changed(null); });
  $("upload").addEventListener("change", async () => {
    const file = $("upload").files[0];
    uploaded = file ? await file.text() : null;
    changed(null);
  });
  changed(null);
}

start();
