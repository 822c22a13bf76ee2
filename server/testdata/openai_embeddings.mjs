// Drives /v1/embeddings of a running TokenRouter server with the official
// openai package: several inputs with the SDK's default transfer (it asks
// for base64 and decodes it) and as floats, token ids, usage, and the
// refusal of a routed preset. Prints one JSON summary line and exits
// non-zero on the first failed check.
//
//   TR_BASE_URL=http://127.0.0.1:30000/v1 TR_API_KEY=... node openai_embeddings.mjs
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

const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const input = ['Once upon a time', 'there was a little dog', 'The sun'];

// The SDK's default: base64 on the wire, numbers in the result.
const packed = await client.embeddings.create({ model: 'embed', input });
check(packed.object === 'list' && packed.model === 'embed', 'list of the preset');
check(packed.data.length === 3, 'one vector per input');
const width = packed.data[0].embedding.length;
for (const [i, d] of packed.data.entries()) {
  check(d.object === 'embedding' && d.index === i, 'item ' + i + ' in order');
  check(Array.isArray(d.embedding) && d.embedding.length === width, 'item ' + i + ' decoded to ' + width + ' numbers');
  check(Math.abs(norm(d.embedding) - 1) < 1e-5, 'item ' + i + ' of unit length, got ' + norm(d.embedding));
}
check(packed.usage.prompt_tokens > 0 && packed.usage.total_tokens === packed.usage.prompt_tokens, 'usage');

// Floats: the same float32 values.
const floats = await client.embeddings.create({ model: 'embed', input, encoding_format: 'float' });
for (let i = 0; i < input.length; i++) {
  const a = floats.data[i].embedding;
  const b = packed.data[i].embedding;
  check(a.every((x, k) => Math.fround(x) === b[k]), 'float and base64 agree on item ' + i);
}
check(floats.usage.prompt_tokens === packed.usage.prompt_tokens, 'same usage');

// Token ids: the ids of the first input embed as its text does.
const ids = await client.embeddings.create({ model: 'embed', input: [[1, 403, 407], [1, 261]], encoding_format: 'float' });
check(ids.data.length === 2 && ids.usage.prompt_tokens === 5, 'lists of token ids, 5 tokens');
const one = await client.embeddings.create({ model: 'embed', input: [1, 403, 407], encoding_format: 'float' });
check(one.data.length === 1 && one.data[0].embedding.every((x, k) => x === ids.data[0].embedding[k]), 'one list of token ids');

// A routed preset is refused, naming model.
const summary = { width, inputs: packed.data.length, tokens: packed.usage.prompt_tokens };
try {
  await client.embeddings.create({ model: 'r2r-random', input: 'x' });
  check(false, 'a routed preset must be refused');
} catch (err) {
  check(err instanceof OpenAI.BadRequestError, 'a BadRequestError, got ' + err);
  summary.error = { status: err.status, param: err.param, message: err.message };
}

console.log(JSON.stringify(summary));
