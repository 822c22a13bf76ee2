// The playground: one or two panes, each streaming an answer from
// /generate with every token coloured by the model that produced it.

import { request, readEvents, el } from "./api.js";

// Colours come from console.css (classes m0..m6, the Okabe-Ito palette,
// with a distinct underline per model so colour is not the only cue).
const PALETTE = 7;

export class Playground {
  constructor(root, compare, runBoth) {
    this.presets = [];
    const tpl = document.getElementById("pane-tpl");
    this.panes = ["A", "B"].map((name, i) => new Pane(root, tpl, name, i));
    this.panes[1].root.hidden = true;
    compare.addEventListener("change", () => {
      this.panes[1].root.hidden = !compare.checked;
      runBoth.hidden = !compare.checked;
      root.classList.toggle("two", compare.checked);
    });
    runBoth.addEventListener("click", () => { for (const p of this.panes) p.run(); });
  }

  // setPresets fills every pane's preset list (/v1/models's data).
  setPresets(list) {
    this.presets = list;
    this.panes.forEach((p, i) => p.setPresets(list, Math.min(i, list.length - 1)));
  }
}

// Pane is one request form and its answer.
class Pane {
  constructor(parent, tpl, name, index) {
    this.root = tpl.content.firstElementChild.cloneNode(true);
    this.root.dataset.pane = name;
    this.root.setAttribute("aria-label", "Answer " + name);
    parent.appendChild(this.root);
    const q = (s) => this.root.querySelector(s);
    this.form = q("form.req");
    this.out = q(".out");
    this.info = q(".tokinfo");
    this.summary = q(".summary");
    this.err = q(".err");
    this.legend = q(".legend");
    this.transcript = q(".transcript");
    this.stopBtn = q(".stop");
    this.select = this.form.elements.preset;
    q(".pane-title").textContent = "Answer " + name;
    // Unique ids for labels inside the copied template.
    for (const c of this.form.querySelectorAll("input[type=radio]")) c.name = "mode-" + index;
    this.form.addEventListener("submit", (ev) => { ev.preventDefault(); this.run(); });
    this.stopBtn.addEventListener("click", () => this.abort && this.abort.abort());
    this.select.addEventListener("change", () => this.describe());
    this.form.addEventListener("change", () => this.modeChanged());
    this.out.addEventListener("keydown", (ev) => this.navigate(ev));
    this.out.addEventListener("focusin", (ev) => this.show(ev.target));
    this.out.addEventListener("mouseover", (ev) => this.show(ev.target));
    this.modeChanged();
  }

  setPresets(list, pick) {
    this.presets = list;
    this.select.replaceChildren(...list.map((p) => {
      const o = el("option", "", p.id);
      o.value = p.id;
      return o;
    }));
    if (pick >= 0) this.select.selectedIndex = pick;
    this.describe();
  }

  preset() { return this.presets.find((p) => p.id === this.select.value); }

  modeChanged() {
    const chat = this.mode() === "chat";
    this.root.querySelector(".system").hidden = !chat;
    this.root.querySelector(".text-label").textContent = chat ? "Message" : "Prompt";
  }

  mode() {
    const c = this.form.querySelector("input[type=radio]:checked");
    return c ? c.value : "chat";
  }

  // describe shows the preset's models, algorithm and fixed parameters.
  describe() {
    const p = this.preset();
    if (!p) return;
    const names = p.models.map((m) => m.name);
    this.root.querySelector(".preset-info").textContent = p.description || "";
    const params = Object.entries(p.params || {}).map(([k, v]) => k + " = " + v).join(", ");
    this.root.querySelector(".algo").textContent = "Routing: " + p.algorithm +
      (params ? " (" + params + ")" : "") + ", set by the preset; the seed above also seeds its random decisions. Context length " +
      p.context_length + " tokens.";
    this.form.elements.max_new_tokens.max = String(p.context_length || "");
    this.models = names;
    this.legend.replaceChildren(...names.map((n, i) => {
      const li = el("li", "");
      li.append(el("span", "swatch m" + (i % PALETTE), "Aa"), " ", el("span", "", n + (i === 0 ? " (small)" : " (large)")));
      return li;
    }));
  }

  body() {
    const f = this.form.elements;
    const sp = {};
    const num = (name, parse) => {
      const v = f[name].value.trim();
      if (v !== "") sp[name] = parse(v);
    };
    num("max_new_tokens", (v) => parseInt(v, 10));
    num("temperature", parseFloat);
    num("top_p", parseFloat);
    num("top_k", (v) => parseInt(v, 10));
    num("seed", (v) => parseInt(v, 10));
    if (f.ignore_eos.checked) sp.ignore_eos = true;
    const b = { model: this.select.value, stream: true, sampling_params: sp };
    if (f.logprobs.checked) b.return_logprob = true;
    const text = f.text.value;
    if (this.mode() === "chat") {
      b.messages = [];
      if (f.system.value.trim() !== "") b.messages.push({ role: "system", content: f.system.value });
      b.messages.push({ role: "user", content: text });
    } else {
      b.text = text;
    }
    return b;
  }

  // run streams one answer into the pane.
  async run() {
    if (!this.form.reportValidity()) return;
    if (this.abort) this.abort.abort();
    const abort = new AbortController();
    this.abort = abort;
    const body = this.body();
    const p = this.preset();
    this.models = p ? p.models.map((m) => m.name) : [];
    this.out.replaceChildren();
    this.transcript.replaceChildren(...(body.messages || [{ role: "prompt", content: body.text }]).map((m) =>
      el("p", "msg", m.role[0].toUpperCase() + m.role.slice(1) + ": " + m.content)));
    this.summary.replaceChildren();
    this.err.textContent = "";
    this.info.textContent = "";
    this.root.dataset.state = "running";
    this.stopBtn.disabled = false;
    const run = { start: performance.now(), first: 0, last: 0, n: 0, byModel: [], final: null };
    try {
      const resp = await request("/generate", {
        method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body), signal: abort.signal,
      });
      await readEvents(resp, (ev) => this.event(run, ev));
      this.root.dataset.state = run.final ? "done" : "cut";
    } catch (e) {
      this.root.dataset.state = "error";
      this.err.textContent = abort.signal.aborted ? "Stopped." : e.message;
    } finally {
      if (this.abort === abort) this.abort = null;
      this.stopBtn.disabled = true;
      this.summarize(run);
    }
  }

  // event takes one streamed event: tokens, trailing text, the final
  // answer, or an error.
  event(run, ev) {
    if (ev.error) throw new Error(ev.error.message || "error");
    if (ev.routing) {
      run.final = ev;
      if (ev.models) this.models = ev.models;
      return;
    }
    const ids = ev.output_ids || [];
    const by = ev.produced_by || [];
    const lps = logprobs(ev);
    if (ids.length === 0) {
      if (ev.text) this.out.append(el("span", "tok tail", ev.text));
      return;
    }
    const now = performance.now();
    if (!run.first) run.first = now;
    run.last = now;
    ids.forEach((id, k) => {
      const m = by[k] ?? 0;
      const span = el("span", "tok m" + (m % PALETTE), k === 0 ? ev.text : "");
      span.tabIndex = -1;
      span.dataset.i = String(run.n);
      span.dataset.m = String(m);
      span.dataset.id = String(id);
      if (lps[k] !== undefined && lps[k] !== null) span.dataset.lp = String(lps[k]);
      span.title = this.describeToken(span);
      this.out.append(span);
      run.byModel[m] = (run.byModel[m] || 0) + 1;
      run.n++;
    });
  }

  describeToken(span) {
    const m = Number(span.dataset.m);
    let s = "Token " + (Number(span.dataset.i) + 1) + ": " + (this.models[m] ?? "model " + m) + ", text " + JSON.stringify(span.textContent) + ", id " + span.dataset.id;
    if (span.dataset.lp !== undefined) s += ", log-probability " + Number(span.dataset.lp).toFixed(3);
    return s;
  }

  show(t) {
    if (t && t.classList && t.classList.contains("tok") && t.dataset.m !== undefined) {
      this.info.textContent = this.describeToken(t);
    }
  }

  // navigate moves the focus between tokens with the arrow keys.
  navigate(ev) {
    const toks = [...this.out.querySelectorAll(".tok[data-m]")];
    if (toks.length === 0) return;
    const i = toks.indexOf(document.activeElement);
    let j = -1;
    if (ev.key === "ArrowRight" || ev.key === "ArrowDown") j = i < 0 ? 0 : Math.min(i + 1, toks.length - 1);
    if (ev.key === "ArrowLeft" || ev.key === "ArrowUp") j = i < 0 ? 0 : Math.max(i - 1, 0);
    if (ev.key === "Home") j = 0;
    if (ev.key === "End") j = toks.length - 1;
    if (j < 0) return;
    ev.preventDefault();
    toks[j].focus();
  }

  // summarize writes tokens by model (the API's routing counts), the
  // large-model share, time to first token and tokens per second.
  summarize(run) {
    const rows = [];
    const add = (k, v, key) => {
      const dd = el("dd", "", v);
      if (key) dd.dataset.k = key;
      rows.push(el("dt", "", k), dd);
    };
    const fin = run.final;
    if (fin && fin.routing) {
      const counts = fin.routing.tokens_by_model || {};
      this.models.forEach((name, i) => {
        const dd = el("dd", "", counts[name] ?? 0);
        dd.dataset.model = name;
        const dt = el("dt", "");
        dt.append(el("span", "swatch m" + (i % PALETTE), "Aa"), " ", "Tokens by " + name);
        rows.push(dt, dd);
      });
      add("Large-model share", (100 * (fin.routing.large_model_ratio || 0)).toFixed(1) + " %", "share");
      add("Finish reason", fin.finish_reason || "", "finish");
    } else if (run.n > 0) {
      run.byModel.forEach((n, i) => add("Tokens by " + (this.models[i] ?? "model " + i) + " (so far)", n || 0));
    }
    if (run.first) {
      add("Time to first token", (run.first - run.start).toFixed(0) + " ms", "ttft");
      const rate = run.n > 1 && run.last > run.first ? (run.n - 1) / ((run.last - run.first) / 1000) : 0;
      add("Tokens per second", rate ? rate.toFixed(1) : "n/a", "tps");
    }
    this.summary.replaceChildren(...rows);
  }
}

// logprobs returns one log-probability (or undefined) per output token of
// a streamed event, from whichever field the server reports them in.
function logprobs(ev) {
  let raw = ev.output_token_logprobs ?? ev.logprobs ?? (ev.meta_info && ev.meta_info.output_token_logprobs);
  if (raw && Array.isArray(raw.content)) raw = raw.content; // OpenAI's {content: [{token, logprob}]}
  if (!Array.isArray(raw)) return [];
  return raw.map((x) => {
    if (typeof x === "number") return x;
    if (Array.isArray(x) && typeof x[0] === "number") return x[0];
    if (x && typeof x.logprob === "number") return x.logprob;
    return undefined;
  });
}
