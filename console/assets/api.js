// The server's API as the console uses it: the key (kept in memory only),
// requests that carry it, and a reader of server-sent events.

const auth = { key: "", onMissing: null };

// setKey sets the API key sent with every request.
export function setKey(k) { auth.key = k; }

// onUnauthorized sets what runs when the server answers 401.
export function onUnauthorized(f) { auth.onMissing = f; }

// Unauthorized is thrown for a 401 answer.
export class Unauthorized extends Error {}

// request fetches path with the key; a 401 calls the unauthorized hook and
// throws Unauthorized; another error status throws the server's message.
export async function request(path, opts = {}) {
  const headers = new Headers(opts.headers || {});
  if (auth.key) headers.set("Authorization", "Bearer " + auth.key);
  const resp = await fetch(path, { ...opts, headers, cache: "no-store" });
  if (resp.status === 401) {
    if (auth.onMissing) auth.onMissing();
    throw new Unauthorized(await errorMessage(resp));
  }
  if (!resp.ok) throw new Error(await errorMessage(resp));
  return resp;
}

// errorMessage reads an error body: OpenAI's shape, or plain text.
async function errorMessage(resp) {
  const text = await resp.text();
  try {
    const j = JSON.parse(text);
    if (j && j.error && j.error.message) return j.error.message;
  } catch (_) { /* not JSON */ }
  return text.trim() || resp.status + " " + resp.statusText;
}

// readEvents calls each with every "data:" payload of a server-sent-events
// response (parsed JSON; "[DONE]" ends it) until the body ends.
export async function readEvents(resp, each) {
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += dec.decode(value, { stream: true });
    let cut;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      for (const line of block.split("\n")) {
        if (!line.startsWith("data: ")) continue;
        const data = line.slice(6);
        if (data === "[DONE]") return;
        each(JSON.parse(data));
      }
    }
  }
}

// el creates an element with a class and, optionally, text (always as
// text: nothing is parsed as HTML).
export function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = String(text);
  return e;
}
