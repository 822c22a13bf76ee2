// Drives a running TokenRouter server with the official openai package:
// models.list, a chat completion, a streaming chat completion, a text
// completion and an unknown-model error. Prints one JSON summary line and
// exits non-zero on the first failed check.
//
//   TR_BASE_URL=http://127.0.0.1:30000/v1 TR_API_KEY=... node openai_e2e.mjs
import OpenAI from 'openai';

const client = new OpenAI({
  baseURL: process.env.TR_BASE_URL,
  apiKey: process.env.TR_API_KEY || 'none',
  maxRetries: 0,
  timeout: 60_000,
});

function check(cond, what) {
  if (!cond) {
    throw new Error('check failed: ' + what);
  }
}

const summary = {};

// models.list
const models = [];
for await (const m of client.models.list()) {
  models.push(m);
}
check(models.length >= 1, 'models.list returns the presets');
const model = models[0].id;
check(models[0].simulated === true, 'the default preset says it is simulated');
summary.models = models.map((m) => m.id);

// models.retrieve
const card = await client.models.retrieve(model);
check(card.id === model && card.object === 'model', 'models.retrieve returns the preset');

// chat completion
const chat = await client.chat.completions.create({
  model,
  messages: [
    { role: 'system', content: 'You are terse.' },
    { role: 'user', content: 'Say something.' },
  ],
  max_tokens: 12,
});
check(chat.object === 'chat.completion', 'chat object');
check(chat.choices[0].message.role === 'assistant', 'assistant message');
check(typeof chat.choices[0].message.content === 'string' && chat.choices[0].message.content.length > 0, 'chat content');
check(chat.choices[0].finish_reason === 'length', 'chat finish_reason');
check(chat.usage.completion_tokens === 12, 'chat usage.completion_tokens');
const byModel = chat.routing.tokens_by_model;
check(Object.values(byModel).reduce((a, b) => a + b, 0) === 12, 'routing.tokens_by_model sums to the output');
summary.chat = { content: chat.choices[0].message.content, usage: chat.usage, routing: chat.routing };

// streaming chat completion
const stream = await client.chat.completions.create({
  model,
  messages: [{ role: 'user', content: 'Stream please.' }],
  max_tokens: 16,
  stream: true,
  stream_options: { include_usage: true },
});
let text = '';
let contentChunks = 0;
let finish = null;
let usage = null;
for await (const chunk of stream) {
  if (chunk.usage) {
    usage = chunk.usage;
  }
  for (const c of chunk.choices) {
    if (c.delta && c.delta.content) {
      text += c.delta.content;
      contentChunks++;
    }
    if (c.finish_reason) {
      finish = c.finish_reason;
    }
  }
}
check(contentChunks === 16, 'one content chunk per token, got ' + contentChunks);
check(finish === 'length', 'stream finish_reason');
check(usage && usage.completion_tokens === 16, 'stream usage');
summary.stream = { text, contentChunks, finish, usage };

// text completion
const comp = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 5 });
check(comp.object === 'text_completion', 'completion object');
check(comp.choices[0].text.trim().split(/\s+/).length === 5, 'five pseudo-words');
check(comp.usage.completion_tokens === 5, 'completion usage');
summary.completion = { text: comp.choices[0].text, usage: comp.usage };

// an error the SDK maps to its typed exception
try {
  await client.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] });
  check(false, 'unknown model must fail');
} catch (err) {
  check(err instanceof OpenAI.NotFoundError, 'unknown model is a NotFoundError, got ' + err);
  check(err.status === 404 && err.code === 'model_not_found' && err.param === 'model', 'error fields');
  summary.error = { status: err.status, code: err.code, type: err.type };
}

// A tool for the tool fields: the simulated model calls it when forced.
const countTool = { type: 'function', function: { name: 'count', description: 'Count.',
  parameters: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'], additionalProperties: false } } };

// Every honoured request field (TR_CHAT_FIELDS, TR_COMPLETION_FIELDS: the
// server's tables), non-streaming and streaming; an unknown field name
// here fails the run.
const values = {
  model: {},
  messages: {},
  prompt: {},
  stream: {},
  stream_options: {},
  max_tokens: { max_tokens: 3 },
  max_completion_tokens: { max_completion_tokens: 3 },
  temperature: { temperature: 0.7, seed: 1 },
  top_p: { top_p: 0.9, temperature: 1 },
  n: { n: 2 },
  stop: { stop: ['zzzz', 'qqqq'] },
  seed: { seed: 42, temperature: 1 },
  frequency_penalty: { frequency_penalty: 0.5 },
  presence_penalty: { presence_penalty: 0.5 },
  logit_bias: { logit_bias: { 5: -100, 7: 3 } },
  top_k: { top_k: 5, temperature: 1 },
  ignore_eos: { ignore_eos: true },
  min_p: { min_p: 0.1, temperature: 1 },
  repetition_penalty: { repetition_penalty: 1.2 },
  stop_token_ids: { stop_token_ids: [2] },
  speculate: { speculate: 3 },
  logprobs: { logprobs: true },
  top_logprobs: { logprobs: true, top_logprobs: 2 },
  response_format: {
    max_tokens: 60,
    response_format: { type: 'json_schema', json_schema: { name: 'count', strict: true,
      schema: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'], additionalProperties: false } } },
  },
  tools: { tools: [countTool] },
  tool_choice: { max_tokens: 120, tools: [countTool], tool_choice: 'required' },
  parallel_tool_calls: { max_tokens: 120, tools: [countTool], tool_choice: 'required', parallel_tool_calls: false },
};
// Values that differ by endpoint.
const completionValues = { logprobs: { logprobs: 2 } };

async function exercise(kind, create, base, fields, own = {}) {
  const done = [];
  for (const f of fields) {
    check(f in values, 'no test value for the honoured field ' + f);
    const params = { ...base, ...(own[f] || values[f]) };
    const n = params.n || 1;
    const want = params.max_tokens || params.max_completion_tokens || base.max_tokens;
    const plain = await create(params);
    check(plain.choices.length === n, kind + ' ' + f + ': ' + n + ' choices');
    check(plain.usage.completion_tokens <= n * want, kind + ' ' + f + ': usage');
    if ('response_format' in params) {
      let parsed = null;
      try { parsed = JSON.parse(plain.choices[0].message.content); } catch (e) { parsed = null; }
      check(parsed && Number.isInteger(parsed.n), kind + ' ' + f + ': JSON matching the schema, got ' + plain.choices[0].message.content);
    }
    if (params.tool_choice === 'required') {
      const calls = plain.choices[0].message.tool_calls || [];
      check(calls.length >= 1 && calls.every((c) => c.function.name === 'count' && Number.isInteger(JSON.parse(c.function.arguments).n)),
        kind + ' ' + f + ': calls of count with an integer, got ' + JSON.stringify(plain.choices[0].message));
      check(params.parallel_tool_calls !== false || calls.length === 1, kind + ' ' + f + ': one call');
    }
    if ('logprobs' in params) {
      const lp = plain.choices[0].logprobs;
      const entries = kind === 'chat' ? lp.content.length : lp.token_logprobs.length;
      check(entries === plain.usage.completion_tokens, kind + ' ' + f + ': one logprob per token');
    }
    const chunks = await create({ ...params, stream: true, stream_options: { include_usage: true } });
    const finished = new Set();
    let usage = null;
    let lpEntries = 0;
    for await (const c of chunks) {
      if (c.usage) usage = c.usage;
      for (const ch of c.choices) {
        if (ch.finish_reason) finished.add(ch.index);
        if (ch.logprobs) lpEntries += kind === 'chat' ? ch.logprobs.content.length : ch.logprobs.token_logprobs.length;
      }
    }
    if ('logprobs' in params) {
      check(usage && lpEntries === usage.completion_tokens, kind + ' ' + f + ' streaming: one logprob per token, got ' + lpEntries);
    }
    check(finished.size === n, kind + ' ' + f + ' streaming: ' + n + ' finished choices, got ' + finished.size);
    check(usage && usage.completion_tokens <= n * want, kind + ' ' + f + ' streaming: usage');
    done.push(f);
  }
  return done;
}

summary.fields = {
  chat: await exercise('chat', (p) => client.chat.completions.create(p),
    { model, messages: [{ role: 'user', content: 'Fields.' }], max_tokens: 4 },
    (process.env.TR_CHAT_FIELDS || '').split(',').filter(Boolean)),
  completions: await exercise('completions', (p) => client.completions.create(p),
    { model, prompt: 'Fields', max_tokens: 4 },
    (process.env.TR_COMPLETION_FIELDS || '').split(',').filter(Boolean), completionValues),
};

// A malformed tools entry is a BadRequestError naming it.
try {
  await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }], tools: [{ type: 'function', function: { name: 'no spaces allowed' } }] });
  check(false, 'a malformed tool must be refused');
} catch (err) {
  check(err instanceof OpenAI.BadRequestError && err.param === 'tools[0].function.name' && err.code === 'invalid_value', 'refusal names the tool, got ' + err);
}

console.log(JSON.stringify(summary));
