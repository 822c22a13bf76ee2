// The console's entry point: the key form, the two views (tabs) and the
// list of presets the playground offers.

import { request, setKey, onUnauthorized, Unauthorized } from "./api.js";
import { Playground } from "./playground.js";
import { Dashboard } from "./dashboard.js";

const $ = (id) => document.getElementById(id);

const status = (text) => { $("status").textContent = text; };

// presets loads /v1/models; it resolves once the server accepts the key.
async function presets() {
  const resp = await request("/v1/models");
  const body = await resp.json();
  return body.data || [];
}

function tabs(dash) {
  const list = [$("tab-play"), $("tab-dash")];
  const show = (tab) => {
    for (const t of list) {
      const on = t === tab;
      t.setAttribute("aria-selected", on ? "true" : "false");
      t.tabIndex = on ? 0 : -1;
      $(t.getAttribute("aria-controls")).hidden = !on;
    }
    if (tab.id === "tab-dash") dash.start(); else dash.stop();
  };
  for (const t of list) {
    t.addEventListener("click", () => show(t));
    t.addEventListener("keydown", (ev) => {
      const i = list.indexOf(t);
      let j = -1;
      if (ev.key === "ArrowRight") j = (i + 1) % list.length;
      if (ev.key === "ArrowLeft") j = (i + list.length - 1) % list.length;
      if (ev.key === "Home") j = 0;
      if (ev.key === "End") j = list.length - 1;
      if (j < 0) return;
      ev.preventDefault();
      list[j].focus();
      show(list[j]);
    });
  }
  if (location.hash === "#dashboard") show(list[1]);
}

function askKey(retry) {
  const form = $("keyform");
  form.hidden = false;
  $("key").focus();
  status("API key required");
  form.onsubmit = async (ev) => {
    ev.preventDefault();
    setKey($("key").value.trim());
    $("keyerr").textContent = "";
    try {
      await retry();
      form.hidden = true;
      $("key").value = "";
    } catch (e) {
      $("key").value = "";
      $("keyerr").textContent = e instanceof Unauthorized ? "The server refused this key: " + e.message : e.message;
    }
  };
}

async function boot() {
  const dash = new Dashboard($("deployment"), $("presets"), status);
  const play = new Playground($("panes"), $("compare"), $("runboth"));
  const load = async () => {
    const list = await presets();
    play.setPresets(list);
    if ($("dash").hidden) status(list.length + " preset" + (list.length === 1 ? "" : "s") + " served");
    else dash.start(); // the dashboard may have been waiting for the key
  };
  onUnauthorized(() => askKey(load));
  tabs(dash);
  try {
    await load();
  } catch (e) {
    if (!(e instanceof Unauthorized)) status("Cannot reach the server: " + e.message);
  }
}

boot();
