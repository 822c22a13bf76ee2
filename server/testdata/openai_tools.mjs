// Drives tool calling on a running TokenRouter server with the official
// openai package: auto (a model that calls, and the tiny model), required
// and a named function on the tiny pair (routed and single), parallel
// calls, a streamed call through the SDK's stream helper, a two-round tool
// loop, and malformed tools as BadRequestErrors. Prints one JSON summary
// line and exits non-zero on the first failed check.
//
//   TR_BASE_URL=http://127.0.0.1:30000/v1 TR_API_KEY=... node openai_tools.mjs
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

const tools = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Weather in a city.',
      parameters: {
        type: 'object',
        properties: { city: { type: 'string', minLength: 1, maxLength: 10 }, unit: { enum: ['c', 'f'] } },
        required: ['city', 'unit'],
        additionalProperties: false,
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'get_time',
      parameters: {
        type: 'object',
        properties: { zone: { type: 'string', maxLength: 6 } },
        required: ['zone'],
        additionalProperties: false,
      },
    },
  },
];

// valid checks a call against the tools' schemas, independently of the
// server: its name, and its arguments' keys, types and bounds.
function valid(call, allowed) {
  check(call.type === 'function' && typeof call.id === 'string' && call.id.startsWith('call_'), 'call id and type: ' + JSON.stringify(call));
  check(allowed.includes(call.function.name), 'call of ' + call.function.name + ', want one of ' + allowed);
  const args = JSON.parse(call.function.arguments);
  const keys = Object.keys(args).sort().join(',');
  if (call.function.name === 'get_weather') {
    check(keys === 'city,unit', 'get_weather arguments ' + call.function.arguments);
    check(typeof args.city === 'string' && [...args.city].length >= 1 && [...args.city].length <= 10, 'city ' + args.city);
    check(args.unit === 'c' || args.unit === 'f', 'unit ' + args.unit);
  } else {
    check(keys === 'zone' && typeof args.zone === 'string' && [...args.zone].length <= 6, 'get_time arguments ' + call.function.arguments);
  }
  return args;
}

const user = (content) => [{ role: 'user', content }];
const summary = {};

// auto: a model that calls (Qwen's format), and the tiny model.
let r = await client.chat.completions.create({ model: 'qwen2.5', messages: user('Weather in Paris?'), tools });
check(r.choices[0].finish_reason === 'tool_calls' && r.choices[0].message.tool_calls.length === 1, 'auto call: ' + JSON.stringify(r));
valid(r.choices[0].message.tool_calls[0], ['get_weather']);
summary.auto = r.choices[0].message.tool_calls;
r = await client.chat.completions.create({ model: 'single', messages: user('Tell me a story.'), tools, tool_choice: 'auto', seed: 2 });
const m = r.choices[0].message;
check((m.tool_calls && m.tool_calls.length > 0) || (typeof m.content === 'string' && m.content.length > 0), 'auto on the tiny model');
for (const c of m.tool_calls || []) valid(c, ['get_weather', 'get_time']);

// parallel: two calls in one answer (Mistral's format).
r = await client.chat.completions.create({ model: 'mistral', messages: user('Weather and time in Lima?'), tools });
check(r.choices[0].finish_reason === 'tool_calls' && r.choices[0].message.tool_calls.length === 2, 'parallel: ' + JSON.stringify(r));
r.choices[0].message.tool_calls.forEach((c) => valid(c, ['get_weather', 'get_time']));
summary.parallel = r.choices[0].message.tool_calls.map((c) => c.function.name);

summary.tiny = {};
for (const model of ['routed', 'single']) {
  // required (one call) and a named function.
  r = await client.chat.completions.create({ model, messages: user('Weather in Rome?'), tools, tool_choice: 'required', parallel_tool_calls: false, seed: 3 });
  check(r.choices[0].finish_reason === 'tool_calls' && r.choices[0].message.tool_calls.length === 1, model + ' required: ' + JSON.stringify(r));
  valid(r.choices[0].message.tool_calls[0], ['get_weather', 'get_time']);
  const byModel = Object.values(r.routing.tokens_by_model).reduce((a, b) => a + b, 0);
  check(byModel === r.usage.completion_tokens, model + ' required: tokens_by_model covers the call');
  const named = { type: 'function', function: { name: 'get_time' } };
  r = await client.chat.completions.create({ model, messages: user('Time in Tokyo?'), tools, tool_choice: named, seed: 5 });
  check(r.choices[0].finish_reason === 'tool_calls' && r.choices[0].message.tool_calls.length === 1, model + ' named');
  valid(r.choices[0].message.tool_calls[0], ['get_time']);
  const unstreamed = r.choices[0].message.tool_calls[0];

  // streamed, through the SDK's stream helper: the same call.
  const stream = client.chat.completions.stream({ model, messages: user('Time in Tokyo?'), tools, tool_choice: named, seed: 5 });
  const done = [];
  stream.on('tool_calls.function.arguments.done', (e) => done.push(e));
  const final = await stream.finalChatCompletion();
  const sc = final.choices[0].message.tool_calls;
  check(final.choices[0].finish_reason === 'tool_calls' && sc.length === 1, model + ' streamed: ' + JSON.stringify(final));
  check(sc[0].function.name === 'get_time' && sc[0].function.arguments === unstreamed.function.arguments, model + ' streamed call matches');
  check(done.length === 1 && done[0].name === 'get_time' && done[0].arguments === unstreamed.function.arguments, model + ' arguments.done event');
  valid(sc[0], ['get_time']);

  // two rounds: the call's result sent back.
  const msgs = user('Weather?');
  const r1 = await client.chat.completions.create({ model, messages: msgs, tools, tool_choice: { type: 'function', function: { name: 'get_weather' } }, seed: 6 });
  const call = r1.choices[0].message.tool_calls[0];
  valid(call, ['get_weather']);
  msgs.push(r1.choices[0].message);
  msgs.push({ role: 'tool', tool_call_id: call.id, content: 'Sunny.' });
  const r2 = await client.chat.completions.create({ model, messages: msgs, tools, max_tokens: 8, seed: 7 });
  check(r2.usage.prompt_tokens > r1.usage.prompt_tokens + r1.usage.completion_tokens, model + ' round 2 prompt holds the call and result');
  const a = r2.choices[0].message;
  check((a.tool_calls && a.tool_calls.length > 0) || typeof a.content === 'string', model + ' round 2 answer');
  for (const c of a.tool_calls || []) valid(c, ['get_weather', 'get_time']);
  summary.tiny[model] = { call, answer: a };
}

// Malformed tools are BadRequestErrors naming the parameter.
for (const [bad, param] of [
  [[{ type: 'function', function: { name: 'bad name!' } }], 'tools[0].function.name'],
  [[{ type: 'function', function: { name: 'f', parameters: 'x' } }], 'tools[0].function.parameters'],
  [[{ type: 'function', function: { name: 'f', extra: 1 } }], 'tools[0].function.extra'],
]) {
  try {
    await client.chat.completions.create({ model: 'single', messages: user('x'), tools: bad });
    check(false, 'a malformed tool must be refused');
  } catch (err) {
    check(err instanceof OpenAI.BadRequestError && err.param === param, 'refusal names ' + param + ', got ' + err + ' ' + err.param);
  }
}

console.log(JSON.stringify(summary));
