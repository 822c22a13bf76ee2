// The live dashboard: one events stream (/console/events), open while the
// dashboard is shown, drawn as small charts per model and per deployment.

import { request, readEvents, el, Unauthorized } from "./api.js";

const HISTORY = 300; // points per chart: five minutes at one a second
const SVG = "http://www.w3.org/2000/svg";

// The per-model charts: frame field, title, unit, digits.
const METRICS = [
  ["runnable", "Queue (runnable)", "", 0],
  ["pending", "Pending (handed off)", "", 0],
  ["batch", "Batch size (mean)", "", 1],
  ["step_ms", "Step latency", " ms", 1],
  ["tok_s", "Tokens/s", "", 1],
  ["routed", "Routed away", " %", 1],
];

export class Dashboard {
  constructor(deployment, presets, status) {
    this.depRoot = deployment;
    this.root = presets;
    this.status = status;
    this.charts = new Map(); // key -> Chart
    this.models = new Map(); // preset/model -> card elements
    this.presetEls = new Map();
    this.inflight = new Chart("in_flight", "Generation requests in flight", "", 0);
    this.depState = el("p", "dep-state");
    this.depRoot.append(this.depState, this.inflight.fig);
  }

  // start opens the stream (and reopens it after a failure) until stop.
  start() {
    if (this.abort) return;
    const abort = new AbortController();
    this.abort = abort;
    this.loop(abort);
  }

  stop() {
    if (this.abort) this.abort.abort();
    this.abort = null;
  }

  async loop(abort) {
    while (!abort.signal.aborted) {
      try {
        const resp = await request("/console/events", { signal: abort.signal });
        this.status("Dashboard live");
        await readEvents(resp, (f) => this.frame(f));
      } catch (e) {
        if (abort.signal.aborted) return;
        if (e instanceof Unauthorized) {
          this.abort = null;
          return; // the key form is up; the tab reopens the stream
        }
        this.status("Dashboard disconnected (" + e.message + "); retrying");
      }
      await new Promise((r) => setTimeout(r, 2000));
    }
  }

  frame(f) {
    this.depState.textContent = f.draining ? "The server is shutting down." :
      "Updated " + new Date(f.t).toLocaleTimeString() + ".";
    this.inflight.push(f.in_flight);
    for (const p of f.presets) this.preset(p);
  }

  preset(p) {
    let pe = this.presetEls.get(p.name);
    if (!pe) {
      pe = { sec: el("section", "preset"), head: el("p", "preset-head"), lat: el("dl", "latency"), grid: el("div", "models") };
      pe.sec.dataset.preset = p.name;
      pe.sec.append(el("h2", "", p.name), pe.head, pe.lat, pe.grid);
      this.root.append(pe.sec);
      this.presetEls.set(p.name, pe);
    }
    pe.head.textContent = p.algorithm + " routing; " + p.active + " request" + (p.active === 1 ? "" : "s") + " in its router.";
    const span = p.ttft.window_s ? "last " + Math.round(p.ttft.window_s) + " s" : "since start";
    const lat = (name, q, key) => {
      const dd = el("dd", "", q.n ? fmt(q.p50) + " / " + fmt(q.p90) + " / " + fmt(q.p99) + " ms (" + q.n + " requests, " + span + ")" : "no requests yet");
      dd.dataset.k = key;
      return [el("dt", "", name + " p50 / p90 / p99"), dd];
    };
    pe.lat.replaceChildren(...lat("Time to first token", p.ttft, "ttft"), ...lat("Time per output token", p.tpot, "tpot"));
    p.models.forEach((m, i) => this.model(p, pe, m, i));
  }

  model(p, pe, m, i) {
    const key = p.name + "/" + m.name;
    let c = this.models.get(key);
    if (!c) {
      c = { card: el("article", "model"), health: el("span", "health"), th: el("p", "thresholds"), charts: METRICS.map((d) => new Chart(...d)) };
      c.card.dataset.model = m.name;
      const h = el("h3", "");
      h.append(el("span", "swatch m" + (i % 7), "Aa"), " " + m.name + (i === 0 ? " (small)" : " (large)") + " ", c.health);
      const grid = el("div", "charts");
      grid.append(...c.charts.map((ch) => ch.fig));
      c.card.append(h, c.th, grid);
      pe.grid.append(c.card);
      this.models.set(key, c);
    }
    c.health.textContent = m.up ? (m.simulated ? "up, simulated" : "up") : "DOWN";
    c.health.className = "health " + (m.up ? "up" : "down");
    c.card.classList.toggle("is-down", !m.up);
    let th = "Launch thresholds: the sub-server's own (started elsewhere; not reported here)";
    if (m.b) {
      const b = m.b.length === 0 ? "1" : m.b.slice(0, 12).join(", ") + (m.b.length > 12 ? ", … (" + m.b.length + " entries)" : "");
      th = "Launch threshold B(n): " + b + " (now " + m.b_now + ")" +
        (m.max_wait_ms ? ", max wait " + fmt(m.max_wait_ms) + " ms" : ", no max wait") +
        (m.b_since ? "; in force since " + new Date(m.b_since).toLocaleTimeString() : "");
    }
    c.th.textContent = th + "; batch of the last step " + m.last_batch + (m.restarts ? "; restarted " + m.restarts + "×" : "") + ".";
    for (const ch of c.charts) ch.push(ch.key === "routed" ? 100 * m.routed : m[ch.key]);
  }
}

function fmt(v) { return v >= 100 ? v.toFixed(0) : v.toFixed(1); }

// Chart is one small line chart with its current value and range as text.
class Chart {
  constructor(key, title, unit, digits) {
    this.key = key;
    this.unit = unit;
    this.digits = digits;
    this.values = [];
    this.fig = el("figure", "chart");
    this.fig.dataset.metric = key;
    const cap = el("figcaption", "");
    this.value = el("span", "v");
    this.range = el("span", "range");
    cap.append(el("span", "t", title), " ", this.value, this.range);
    this.svg = document.createElementNS(SVG, "svg");
    this.svg.setAttribute("viewBox", "0 0 " + HISTORY + " 40");
    this.svg.setAttribute("preserveAspectRatio", "none");
    this.svg.setAttribute("aria-hidden", "true");
    this.line = document.createElementNS(SVG, "polyline");
    this.svg.append(this.line);
    this.fig.append(cap, this.svg);
  }

  push(v) {
    this.values.push(Number.isFinite(v) ? v : 0);
    if (this.values.length > HISTORY) this.values.shift();
    const max = Math.max(...this.values);
    const min = Math.min(...this.values);
    const top = max > 0 ? max : 1;
    // The line fills the chart from the right; until a minute is seen it
    // spreads over a minute's width.
    const slots = Math.max(this.values.length, 60);
    const dx = HISTORY / (slots - 1);
    const x0 = HISTORY - dx * (this.values.length - 1);
    this.line.setAttribute("points", this.values.map((y, i) => (x0 + i * dx).toFixed(1) + "," + (38 - 36 * y / top).toFixed(1)).join(" "));
    this.value.textContent = v.toFixed(this.digits) + this.unit;
    this.range.textContent = " (range " + min.toFixed(this.digits) + " to " + max.toFixed(this.digits) + this.unit + ")";
    this.fig.dataset.last = String(v);
    this.fig.dataset.max = String(max);
  }
}
