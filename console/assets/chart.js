// Time-series charts for the dashboard, drawn in SVG: a time axis (seconds
// before the latest sample), a value axis from 0 with its quantity and
// unit, tick labels on both, and a legend naming each series with its
// latest value and range. A model's series takes the model's colour and
// dash pattern (classes s0..s6, the playground's m0..m6 colours).
//
// Everything a chart shows is in its DOM, for people and tests alike:
// .axis-title.x and .axis-title.y, .tick.x and .tick.y labels, one
// polyline.series per series (data-series, data-last, data-max) and one
// legend item per series (data-series).

import { el } from "./api.js";

const SVG = "http://www.w3.org/2000/svg";
const W = 360; // the drawing's width and height in its own units: text
const H = 190; // scales with the chart's width
const M = { l: 50, r: 12, t: 10, b: 38 }; // margins: tick labels and axis titles
const PW = W - M.l - M.r;
const PH = H - M.t - M.b;

// HISTORY is the span a chart holds, in seconds.
export const HISTORY = 300;

// PALETTE is the number of model colours (console.css: m0..m6, s0..s6).
export const PALETTE = 7;

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = String(text);
  return e;
}

// fmt formats v with at most digits decimals, fewer for large values.
export function fmt(v, digits = 1) {
  if (!Number.isFinite(v)) return "–";
  return Math.abs(v) >= 100 ? v.toFixed(0) : v.toFixed(digits);
}

// niceStep is the smallest 1, 2 or 5 × 10^k at least raw.
function niceStep(raw) {
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

// yScale is the value axis for values up to max: its top and tick step,
// about four ticks above 0; integer quantities get integer ticks.
function yScale(max, integer) {
  const want = max > 0 ? max : 1;
  let step = niceStep(want / 4);
  if (integer) step = Math.max(1, Math.round(step));
  return { top: step * Math.ceil(want / step - 1e-9), step };
}

// xSpan is the time span shown: at least a minute, whole minutes up to
// HISTORY, and its tick step (at most six ticks past 0).
function xSpan(ageS) {
  const span = Math.min(HISTORY, Math.max(60, Math.ceil(ageS / 60) * 60));
  const step = span <= 60 ? 10 : span <= 120 ? 20 : span <= 180 ? 30 : 60;
  return { span, step };
}

// Chart is one figure: title, plot with axes, and legend.
export class Chart {
  // metric names the figure (data-metric); quantity and unit make the
  // value axis's title ("Step latency (ms)"); digits are the decimals of
  // values; integer says the quantity counts things.
  constructor(metric, title, quantity, unit, digits, integer) {
    this.unit = unit;
    this.digits = digits;
    this.integer = integer;
    this.series = new Map(); // name -> {cls, label, points: [[t, v]], line, item}
    this.fig = el("figure", "chart");
    this.fig.dataset.metric = metric;
    this.fig.dataset.unit = unit;
    this.svg = svg("svg", { viewBox: "0 0 " + W + " " + H, class: "plot", "aria-hidden": "true" });
    this.grid = svg("g", { class: "grid" });
    this.ticks = svg("g", { class: "ticks" });
    this.lines = svg("g", { class: "lines" });
    const axes = svg("path", { class: "axis", d: "M" + M.l + "," + M.t + "V" + (M.t + PH) + "H" + (M.l + PW) });
    const xt = svg("text", { class: "axis-title x", x: M.l + PW / 2, y: H - 4, "text-anchor": "middle" }, "Time (s)");
    const yt = svg("text", { class: "axis-title y", transform: "translate(12," + (M.t + PH / 2) + ") rotate(-90)", "text-anchor": "middle" },
      quantity + " (" + unit + ")");
    this.svg.append(this.grid, axes, this.ticks, this.lines, xt, yt);
    this.legend = el("ul", "chart-legend");
    this.legend.setAttribute("aria-label", title + ": series, latest value and range over the chart");
    this.fig.append(el("figcaption", "", title), this.svg, this.legend);
  }

  // push adds the samples taken at t (ms since the epoch): each is
  // {name, label, cls, v}; cls is the series' colour class (s0..s6 for a
  // model's). Samples older than HISTORY go.
  push(t, samples) {
    for (const s of samples) {
      let ser = this.series.get(s.name);
      if (!ser) {
        ser = { cls: s.cls, points: [], line: svg("polyline", { class: "series " + s.cls }), item: el("li", "") };
        ser.line.dataset.series = s.name;
        ser.item.dataset.series = s.name;
        this.lines.append(ser.line);
        this.legend.append(ser.item);
        this.series.set(s.name, ser);
      }
      ser.label = s.label;
      ser.points.push([t, Number.isFinite(s.v) ? s.v : 0]);
      while (ser.points.length && t - ser.points[0][0] > HISTORY * 1000) ser.points.shift();
    }
    this.draw(t);
  }

  draw(now) {
    let oldest = now;
    let max = 0;
    for (const ser of this.series.values()) {
      for (const [t, v] of ser.points) {
        oldest = Math.min(oldest, t);
        max = Math.max(max, v);
      }
    }
    const xs = xSpan((now - oldest) / 1000);
    const ys = yScale(max, this.integer);
    const x = (t) => M.l + PW * (1 - (now - t) / 1000 / xs.span);
    const y = (v) => M.t + PH * (1 - v / ys.top);
    this.drawTicks(xs, ys, y);
    for (const ser of this.series.values()) this.drawSeries(ser, x, y);
  }

  drawTicks(xs, ys, y) {
    const grid = [];
    const ticks = [];
    for (let s = xs.span; s >= 0; s -= xs.step) {
      const px = M.l + PW * (1 - s / xs.span);
      grid.push(svg("line", { x1: px, x2: px, y1: M.t, y2: M.t + PH }));
      ticks.push(svg("text", { class: "tick x", x: px, y: M.t + PH + 13, "text-anchor": "middle" }, s === 0 ? "0" : "−" + s));
    }
    // Thousands from 10 000 on, so that a label fits beside the axis title.
    const k = ys.top >= 10000 ? 1000 : 1;
    const step = ys.step / k;
    const yDigits = step >= 1 ? 0 : Math.ceil(-Math.log10(step));
    for (let i = 0; i * ys.step <= ys.top + ys.step / 2; i++) {
      const py = y(i * ys.step);
      grid.push(svg("line", { x1: M.l, x2: M.l + PW, y1: py, y2: py }));
      ticks.push(svg("text", { class: "tick y", x: M.l - 4, y: py + 3.5, "text-anchor": "end" },
        (i * step).toFixed(yDigits) + (k > 1 && i > 0 ? "k" : "")));
    }
    this.grid.replaceChildren(...grid);
    this.ticks.replaceChildren(...ticks);
  }

  drawSeries(ser, x, y) {
    const vals = ser.points.map((p) => p[1]);
    const last = vals.length ? vals[vals.length - 1] : 0;
    const lo = Math.min(...vals);
    const hi = Math.max(...vals);
    ser.line.setAttribute("points", ser.points.map(([t, v]) => x(t).toFixed(1) + "," + y(v).toFixed(1)).join(" "));
    ser.line.dataset.last = String(last);
    ser.line.dataset.max = String(hi);
    const key = svg("svg", { class: "key", viewBox: "0 0 24 8", "aria-hidden": "true" });
    key.append(svg("line", { class: "series " + ser.cls, x1: 1, x2: 23, y1: 4, y2: 4 }));
    const u = this.unit === "%" ? "%" : " " + this.unit;
    ser.item.replaceChildren(key, el("span", "name", ser.label), " ",
      el("span", "v", fmt(last, this.digits) + u),
      el("span", "range", " (" + fmt(lo, this.digits) + "–" + fmt(hi, this.digits) + ")"));
  }
}
