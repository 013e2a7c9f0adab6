// trainplan ui: plans exactly the workload chosen (a file given to `trainplan ui`, an upload, or the
// built-in default) with only the controls a person moved as overrides, and draws what comes back.
// Nothing is computed here: every number and its text are those of `trainplan plan`.
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
const MEMORY_COLOURS = {
  weights_bytes: "#2a62c9", grads_bytes: "#6c9be8", optimizer_bytes: "#8e44ad",
  activation_bytes: "#d2691e", rest: "#9aa3b5",
};
const SVG_NS = "http://www.w3.org/2000/svg";
const FROM_FILE = "__file";  // the accelerator option of an inline (custom) accelerator

const $ = (id) => document.getElementById(id);
let accelerators = [];
let params = 93e6;          // model.params as sent; the log slider only moves it
let changes = 0;            // every input event counts one
let inflight = false;
let dirty = false;
let touched = new Set();    // the controls moved since the workload was chosen: only these are sent
let sync = true;            // set the controls from the next answer (a workload was just chosen)

// ---------------------------------------------------------------- formatting (control labels only)

function siCount(x) {
  const steps = [[1e12, "T"], [1e9, "B"], [1e6, "M"], [1e3, "k"]];
  for (const [scale, prefix] of steps) {
    if (Math.abs(x) >= scale) return `${+(x / scale).toPrecision(3)} ${prefix}`;
  }
  return `${+x.toPrecision(3)}`;
}
function dollarsPerHour(x) { return `$${Number(x).toFixed(x < 1 ? 3 : 2)}/h`; }
function percent(fraction) { return `${(fraction * 100).toFixed(1)} %`; }
function roundSignificant(x, digits) { return Number(x.toPrecision(digits)); }

// ---------------------------------------------------------------- controls

// Each control: the workload keys it sends, read from the control; and how it shows a workload's value.
const CONTROLS = {
  cameras: { get: () => ({ "data.cameras": Number($("cameras").value) }),
             set: (c) => { $("cameras").value = c["data.cameras"]; } },
  resolution: {
    get: () => { const [w, h] = $("resolution").value.split("x").map(Number); return { "data.width": w, "data.height": h }; },
    set: (c) => {
      const value = `${c["data.width"]}x${c["data.height"]}`;
      if (![...$("resolution").options].some((o) => o.value === value)) {
        $("resolution").append(option(value, `${c["data.width"]}×${c["data.height"]} (from the file)`));
      }
      $("resolution").value = value;
    } },
  fps: { get: () => ({ "data.fps": Number($("fps").value) }), set: (c) => { $("fps").value = c["data.fps"]; } },
  access: { get: () => ({ "data.access": $("access").value }), set: (c) => { $("access").value = c["data.access"]; } },
  params: { get: () => ({ "model.params": params }),
            set: (c) => { params = c["model.params"]; $("params").value = Math.log10(params); } },
  count: { get: () => ({ "cluster.count": 2 ** Number($("count").value) }),
           set: (c) => { $("count").value = Math.round(Math.log2(c["cluster.count"])); $("count").dataset.shown = c["cluster.count"]; } },
  accelerator: {
    get: () => ($("accelerator").value === FROM_FILE ? {} : { "cluster.accelerator": $("accelerator").value }),
    set: (c) => {
      const own = [...$("accelerator").options].find((o) => o.value === FROM_FILE);
      if (c["cluster.accelerator"] === null) {
        const text = `${c["cluster.accelerator_name"]} (from the file)`;
        if (own) own.textContent = text; else $("accelerator").prepend(option(FROM_FILE, text));
        $("accelerator").value = FROM_FILE;
      } else {
        if (own) own.remove();
        $("accelerator").value = c["cluster.accelerator"];
      }
    } },
  cores: { get: () => ({ "cluster.cores": Number($("cores").value) }), set: (c) => { $("cores").value = c["cluster.cores"]; } },
  nvdec: { get: () => ({ "cluster.nvdec": $("nvdec").checked }), set: (c) => { $("nvdec").checked = c["cluster.nvdec"]; } },
  "accelerator-hour": { get: () => ({ "prices.accelerator_hour": Number($("accelerator-hour").value) }),
                        set: (c) => { $("accelerator-hour").value = c["prices.accelerator_hour"]; } },
  "core-hour": { get: () => ({ "prices.core_hour": Number($("core-hour").value) }),
                 set: (c) => { $("core-hour").value = c["prices.core_hour"]; } },
};

function settings() {
  const out = {};
  for (const id of touched) Object.assign(out, CONTROLS[id].get());
  return out;
}

function showControlValues() {
  $("cameras-value").textContent = $("cameras").value;
  $("fps-value").textContent = `${$("fps").value} frames/s`;
  $("params-value").textContent = siCount(params);
  $("cores-value").textContent = $("cores").value;
  const count = touched.has("count") || !$("count").dataset.shown ? 2 ** Number($("count").value) : Number($("count").dataset.shown);
  $("count-value").textContent = count.toLocaleString("en-US");
  $("accelerator-hour-value").textContent = dollarsPerHour(Number($("accelerator-hour").value));
  $("core-hour-value").textContent = dollarsPerHour(Number($("core-hour").value));
  const acc = accelerators.find((a) => a.key === $("accelerator").value);
  const engines = acc ? acc.video_decoders : 0;
  $("nvdec-engines").textContent = `(${engines} engine${engines === 1 ? "" : "s"})`;
}

function applyControls(c) {
  for (const control of Object.values(CONTROLS)) control.set(c);
  const locked = c["model.params_locked"];
  $("params").disabled = Boolean(locked);
  $("params-locked").hidden = !locked;
  $("params-locked").textContent = locked ? `the model size is ${locked}` : "";
  const tokens = c["data.kind"] === "tokens";
  const images = c["data.kind"] === "images";
  document.body.classList.toggle("kind-tokens", tokens);
  document.body.classList.toggle("kind-images", images);
  document.body.dataset.kind = c["data.kind"];
  $("kind-note").hidden = !(tokens || images);
  $("kind-note").textContent = tokens ? "A token corpus: the video controls do not apply."
    : images ? "An image corpus: each image is planned as one frame, decoded once; cameras and frame rate do not apply."
    : "";
  $("frames-legend").textContent = images ? "Images" : "Video";
  $("bill-label").textContent = `Data bill per ${c["data.unit"]}`;
  showControlValues();
}

function option(value, text) {
  const o = document.createElement("option");
  o.value = value;
  o.textContent = text;
  return o;
}

function changed(event) {
  const id = event && event.target && event.target.id;
  if (id === "params") params = roundSignificant(10 ** Number($("params").value), 2);
  if (id && CONTROLS[id]) touched.add(id);
  changes += 1;
  document.body.dataset.changes = String(changes);
  showControlValues();
  dirty = true;
  if (!inflight) send();
}

function chooseWorkload() {  // a new base: the controls follow its values, nothing is overridden
  touched = new Set();
  sync = true;
  changed(null);
}

// ---------------------------------------------------------------- requests

// The workload the controls apply to: an uploaded file's text, one of the files given to
// `trainplan ui` (by name), or the built-in default. The page never sends a file path.
let uploaded = null;
const UPLOADED = "\u0000uploaded";  // the "Start from" entry of an upload (no file is named so)
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
      if (sync) { applyControls(data.controls); sync = false; }
      else document.body.dataset.kind = data.controls["data.kind"];
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

function showError(message) {  // an error replaces the figures: none of a previous plan stays on screen
  const el = $("error");
  el.hidden = !message;
  el.textContent = message || "";
  $("answer").hidden = Boolean(message);
  document.body.classList.toggle("has-error", Boolean(message));
}

// ---------------------------------------------------------------- rendering

function text(report, key) {
  const figure = (report.display || {})[key];
  return figure ? figure.text : "—";
}

function render(report) {
  const p = report.pipeline;
  const w = report.workload;
  $("headline").textContent = `${text(report, "workload.params")} parameters, ${text(report, "workload.tokens")} tokens, `
    + `${report.controls["cluster.count"].toLocaleString("en-US")} x ${w.accelerator_name}`;

  const screen = $("first-screen");
  screen.replaceChildren();
  for (const line of report.first_screen || []) {
    const dt = document.createElement("dt");
    dt.textContent = line.label;
    const dd = document.createElement("dd");
    dd.textContent = line.text;
    dd.dataset.label = line.label;
    screen.append(dt, dd);
  }
  $("verdict").textContent = typeof report.verdict === "string" ? report.verdict : "";

  const chart = report.memory_chart;
  const mem = $("memory-per-device");
  mem.textContent = `${chart.per_device.text} of ${chart.card.text}`;
  mem.dataset.value = String(chart.per_device.bytes);
  mem.classList.toggle("bad", !chart.fits);

  $("wall-time").textContent = text(report, "compute.wall_seconds");
  const cost = $("training-cost");
  const tc = report.training_cost || {};
  cost.textContent = tc.budget === undefined || tc.budget === null ? "—" : text(report, "training_cost.budget");
  cost.dataset.value = String(tc.budget);

  const busy = $("busy");
  busy.textContent = percent(p.busy);
  busy.dataset.value = String(p.busy);

  const bottleneck = $("bottleneck");
  bottleneck.textContent = p.bottleneck;
  bottleneck.className = "value " + p.bottleneck;

  const needed = $("cores-needed");
  needed.textContent = p.cores_needed === null ? "—" : text(report, "pipeline.cores_needed");
  needed.dataset.value = String(p.cores_needed);

  $("layout").textContent = report.layout_text;
  const serving = Boolean(report.controls.serving && report.serving);  // shown when the workload describes serving
  $("serving").hidden = !serving;
  if (serving) {
    $("serving-tokens").textContent = text(report, "serving.tokens_per_second");
    $("serving-cost").textContent = text(report, "serving.cost_per_million_requests");
    $("serving-replicas").textContent = text(report, "serving.replicas");
  }

  const total = $("bill-total");
  total.textContent = text(report, "bill.total");
  total.dataset.value = String(report.bill.total);
  renderBill(report);
  renderMemory(chart);
  renderDetails(report);
  if (report.series) renderPlot(report.series, p);
  else $("plot").replaceChildren();
}

function renderBill(report) {
  const b = report.bill;
  const bar = $("bill-bar");
  const list = $("bill-split");
  bar.replaceChildren();
  list.replaceChildren();
  for (const [key, label, colour] of BILL_PARTS) {
    const share = b.total > 0 ? b[key] / b.total : 0;
    const seg = document.createElement("span");
    seg.className = key;
    seg.style.width = `${(share * 100).toFixed(2)}%`;
    seg.title = `${label}: ${text(report, `bill.${key}`)}`;
    bar.append(seg);
    const li = document.createElement("li");
    li.id = `bill-${key.replace("_", "-")}`;
    li.style.setProperty("--swatch", colour);
    li.textContent = `${label} ${text(report, `bill.${key}`)} (${(share * 100).toFixed(0)} %)`;
    list.append(li);
  }
  if (b.per_epochs && b.per_epochs["10"] !== undefined) {
    const li = document.createElement("li");
    li.id = "bill-ten-epochs";
    li.className = "plain";
    li.textContent = `over ten epochs ${text(report, "bill.per_epochs.10")}`;
    list.append(li);
  }
}

function renderMemory(chart) {
  const el = $("memory-chart");
  el.replaceChildren();
  const W = 640, left = 8, right = 8, barTop = 18, barH = 26;
  const top = Math.max(chart.card.bytes, chart.per_device.bytes) || 1;
  const X = (b) => left + (b / top) * (W - left - right);
  let at = 0;
  chart.parts.forEach((part) => {
    el.append(svg("rect", { x: X(at), y: barTop, width: Math.max(0, X(at + part.bytes) - X(at)), height: barH,
      fill: MEMORY_COLOURS[part.key] || "#9aa3b5", "data-part": part.key }));
    at += part.bytes;
  });
  const cx = X(chart.card.bytes);
  el.append(svg("line", { id: "memory-card", class: "card", x1: cx, x2: cx, y1: barTop - 8, y2: barTop + barH + 6 }));
  el.append(svg("text", { x: cx > W * 0.7 ? cx - 4 : cx + 4, y: barTop - 2, "text-anchor": cx > W * 0.7 ? "end" : "start" },
    `card ${chart.card.text}`));
  // the legend below the bar as text, never over it (it wraps on a phone)
  const legend = $("memory-legend");
  legend.replaceChildren();
  for (const part of chart.parts) {
    const li = document.createElement("li");
    li.style.setProperty("--swatch", MEMORY_COLOURS[part.key] || "#9aa3b5");
    li.textContent = `${part.label} ${part.text}`;
    legend.append(li);
  }
}

// The figures of the details table, by JSON key and kind of workload: labels and texts come from
// the server's `display` (planning/figures.py and the CLI's formatter), so the page reads as the CLI does.
const DETAIL_FIGURES = {
  video: ["pipeline.demand_fps", "pipeline.supply_fps", "pipeline.tokens_per_frame", "pipeline.pixels_per_token",
          "pipeline.threshold_params", "pipeline.stored_bytes_per_hour", "pipeline.decoded_bytes_per_hour",
          "compute.seconds_per_step", "network.share_of_step", "storage.checkpoint_bytes",
          "training_cost.accelerator_hours", "workload.accelerator_name"],
  tokens: ["pipeline.demand_tokens_per_second", "pipeline.supply_tokens_per_second", "compute.flops",
           "compute.steps", "compute.seconds_per_step", "compute.tokens_per_step", "network.share_of_step",
           "storage.data_bytes", "storage.checkpoint_bytes", "training_cost.accelerator_hours",
           "training_cost.dollars_per_attempt", "energy.kwh", "workload.accelerator_name"],
};

function renderDetails(report) {
  const display = report.display || {};
  const body = $("details").tBodies[0];
  body.replaceChildren();
  for (const key of DETAIL_FIGURES[report.controls["data.kind"]] || DETAIL_FIGURES.video) {
    const figure = display[key];
    if (!figure || figure.text === "n/a") continue;  // a figure this workload does not have
    const tr = body.insertRow();
    tr.dataset.key = key;
    tr.insertCell().textContent = figure.label;
    tr.insertCell().textContent = figure.text;
  }
}

function svg(tag, attrs, content) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  if (content !== undefined) el.textContent = content;
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
      `${p.cores_needed.toFixed(1)} cores needed`));
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
    "text-anchor": anchor }, `${p.cores.toFixed(0)} cores: ${percent(p.busy)}`));
}

// ---------------------------------------------------------------- start

async function start() {
  try {
    const response = await fetch("/api/options");
    const opts = await response.json();
    accelerators = opts.accelerators;
    for (const r of opts.resolutions) $("resolution").append(option(`${r.width}x${r.height}`, `${r.label} (${r.width}×${r.height})`));
    for (const a of opts.access) $("access").append(option(a, a === "decoded" ? "decoded (pre-decoded frames)" : a));
    for (const a of opts.accelerators) $("accelerator").append(option(a.key, a.name));
    for (const w of opts.workloads || []) $("base").append(option(w, w));
    if ((opts.workloads || []).length) $("base").value = opts.workloads[0];  // the file `trainplan ui` was given
  } catch (err) {
    showError(`trainplan ui is not answering (${err})`);
    return;
  }
  for (const el of document.querySelectorAll("#controls input, #controls select")) {
    if (el.id !== "base" && el.id !== "upload") el.addEventListener("input", changed);  // range, select, checkbox
  }
  $("reset").addEventListener("click", chooseWorkload);
  $("base").addEventListener("input", () => {
    if ($("base").value === UPLOADED) return;  // the upload is already what is planned
    uploaded = null;
    $("upload").value = "";
    for (const o of [...$("base").options]) if (o.dataset.uploaded) o.remove();
    chooseWorkload();
  });
  $("upload").addEventListener("change", async () => {
    const file = $("upload").files[0];
    uploaded = file ? await file.text() : null;
    // "Start from" names what is planned: the uploaded file, until a given file is chosen again
    for (const o of [...$("base").options]) if (o.dataset.uploaded) o.remove();
    if (file) {
      const o = option(UPLOADED, `uploaded: ${file.name}`);
      o.dataset.uploaded = "1";
      $("base").append(o);
      $("base").value = UPLOADED;
    }
    chooseWorkload();
  });
  chooseWorkload();
}

start();
