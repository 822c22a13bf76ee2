// The live dashboard: one events stream (/console/events), open while the
// dashboard is shown, drawn as charts per deployment (preset), one line
// per model in the model's playground colour.

import { request, readEvents, el, Unauthorized } from "./api.js";
import { Chart, PALETTE, fmt } from "./chart.js";

// The per-preset charts, a series per model: frame field, title, the value
// axis's quantity and unit, decimals, whether it counts things, and how a
// model's frame gives the value.
const METRICS = [
  ["runnable", "Queue: requests waiting for a step here", "Queue length", "requests", 0, true, (m) => m.runnable],
  ["pending", "Parked: requests waiting on another model", "Parked", "requests", 0, true, (m) => m.pending],
  ["batch", "Batch size (mean per step)", "Batch size", "sequences", 1, false, (m) => m.batch],
  ["step_ms", "Step latency (mean per step)", "Latency", "ms", 1, false, (m) => m.step_ms],
  ["tok_s", "Throughput: tokens committed", "Throughput", "tok/s", 1, false, (m) => m.tok_s],
  ["routed", "Handed off: stepped requests sent to another model", "Handed off", "%", 1, false, (m) => 100 * m.routed],
];

export class Dashboard {
  constructor(deployment, presets, status) {
    this.depRoot = deployment;
    this.root = presets;
    this.status = status;
    this.models = new Map(); // preset/model -> card elements
    this.presetEls = new Map();
    this.inflight = new Chart("in_flight", "Generation requests in flight", "In flight", "requests", 0, true);
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
    this.t = f.t;
    this.depState.textContent = f.draining ? "The server is shutting down." :
      "Updated " + new Date(f.t).toLocaleTimeString() + ".";
    this.inflight.push(f.t, [{ name: "in_flight", label: "all presets", cls: "total", v: f.in_flight }]);
    for (const p of f.presets) this.preset(p);
  }

  preset(p) {
    let pe = this.presetEls.get(p.name);
    if (!pe) {
      pe = { sec: el("section", "preset"), head: el("p", "preset-head"), lat: el("dl", "latency"), grid: el("div", "models"),
        charts: METRICS.map((d) => new Chart(...d.slice(0, 6))) };
      pe.sec.dataset.preset = p.name;
      const charts = el("div", "charts");
      charts.append(...pe.charts.map((c) => c.fig));
      pe.sec.append(el("h2", "", p.name), pe.head, pe.lat, pe.grid, charts);
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
    pe.charts.forEach((c, k) => c.push(this.t, p.models.map((m, i) => ({
      name: m.name, label: m.name + (i === 0 ? " (small)" : " (large)"), cls: "s" + (i % PALETTE), v: METRICS[k][6](m),
    }))));
  }

  model(p, pe, m, i) {
    const key = p.name + "/" + m.name;
    let c = this.models.get(key);
    if (!c) {
      c = { card: el("article", "model"), health: el("span", "health"), th: el("p", "thresholds") };
      c.card.dataset.model = m.name;
      const h = el("h3", "");
      h.append(el("span", "swatch m" + (i % PALETTE), "Aa"), " " + m.name + (i === 0 ? " (small)" : " (large)") + " ", c.health);
      c.card.append(h, c.th);
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
  }
}
