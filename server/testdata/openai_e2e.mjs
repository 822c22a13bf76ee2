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

console.log(JSON.stringify(summary));
