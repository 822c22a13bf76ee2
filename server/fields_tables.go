package server

// The request fields of each endpoint (see fields.go). Fields shared by
// chat and completions come first in both tables, in the same order.

// Default values of refused fields.
var (
	isFalse     = []string{"false"}
	isZero      = []string{"0"}
	isOne       = []string{"1"}
	isEmptyList = []string{"[]"}
)

// streamOptionFields are the fields of stream_options.
var streamOptionFields = []field{
	{name: "include_usage", use: honoured, note: "a last chunk with usage (and routing) and no choices, before [DONE]; every other chunk has usage null"},
	{name: "include_obfuscation", use: noOp, note: "no obfuscation padding is ever sent"},
}

// sharedOpenAIFields are the fields chat and completions share.
func sharedOpenAIFields() []field {
	return []field{
		{name: "model", use: honoured, note: "a preset name; absent: the first preset"},
		{name: "max_tokens", use: honoured, note: "clamped to the context left when absent"},
		{name: "temperature", use: honoured, note: "0 to 100; 0 is greedy"},
		{name: "top_p", use: honoured, note: "(0, 1]"},
		{name: "n", use: honoured, note: "1 to 16 choices, each its own routed request (seeds offset by the index)"},
		{name: "stream", use: honoured},
		{name: "stream_options", use: honoured, sub: streamOptionFields, note: "only with stream true (400 otherwise)"},
		{name: "stop", use: honoured, note: "a string or up to 4 strings; the output ends before the first"},
		{name: "seed", use: honoured, note: "seeds sampling and the routing algorithm's draws"},
		{name: "frequency_penalty", use: honoured, note: "-2 to 2, over the output so far, on every model"},
		{name: "presence_penalty", use: honoured, note: "-2 to 2, over the output so far, on every model"},
		{name: "logit_bias", use: honoured, note: "token id -> -100 to 100, on every model"},
		{name: "user", use: noOp, note: "not recorded"},
		{name: "top_k", use: honoured, note: "extension: keep the k most likely tokens (0 disables)"},
		{name: "ignore_eos", use: honoured, note: "extension: generate past the end-of-sequence token"},
		{name: "min_p", use: honoured, note: "extension: 0 to 1, relative to the most likely token"},
		{name: "repetition_penalty", use: honoured, note: "extension: (0, 10], over prompt and output; 1 is off"},
		{name: "stop_token_ids", use: honoured, note: "extension: the output ends before any of these tokens"},
		{name: "speculate", use: honoured, note: "extension: speculation depth bound, -1 off, 0 the server's, 1 to 64 tokens (output unchanged)"},
	}
}

// messageFields are the fields of one chat message.
var messageFields = []field{
	{name: "role", use: honoured, note: "system, developer (as system), user, assistant or tool"},
	{name: "content", use: honoured, note: "a string, null, or a list of text parts"},
	{name: "name", use: noOp, note: "the chat templates have no place for it"},
	{name: "tool_call_id", use: honoured, note: "role tool: the call a result answers, up to 256 bytes (templates that show it do)"},
	{name: "refusal", use: noOp},
	{name: "tool_calls", use: honoured, sub: messageToolCallFields, list: true, note: "an assistant's calls (up to 128), rendered with the template's tool-call format"},
	{name: "function_call", use: refused, note: "the legacy form: use tool_calls"},
	{name: "audio", use: refused, note: "text only"},
}

// messageToolCallFields are the fields of one call of an assistant
// message.
var messageToolCallFields = []field{
	{name: "id", use: honoured, note: "up to 256 bytes"},
	{name: "type", use: honoured, note: "function"},
	{name: "function", use: honoured, sub: []field{
		{name: "name", use: honoured, note: "a-z, A-Z, 0-9, _ and -, up to 64 bytes"},
		{name: "arguments", use: honoured, note: "a JSON text (an object is given to the template decoded)"},
	}},
}

// toolFields are the fields of one tool.
var toolFields = []field{
	{name: "type", use: honoured, note: "function (custom tools are refused)"},
	{name: "function", use: honoured, sub: []field{
		{name: "name", use: honoured, note: "a-z, A-Z, 0-9, _ and -, up to 64 bytes, distinct"},
		{name: "description", use: honoured, note: "up to 16 KiB"},
		{name: "parameters", use: honoured, note: "a JSON Schema object; with tool_choice required or named, unsupported keywords are refused naming them"},
		{name: "strict", use: noOp, note: "forced calls always match the schema"},
	}},
}

// toolChoiceFields are the fields of tool_choice's object form.
var toolChoiceFields = []field{
	{name: "type", use: honoured, note: "function"},
	{name: "function", use: honoured, sub: []field{{name: "name", use: honoured, note: "one of the tools"}}},
	{name: "allowed_tools", use: refused},
	{name: "custom", use: refused, note: "custom tools are not supported"},
}

// chatFields is the body of /v1/chat/completions.
var chatFields = fieldTable{what: "POST /v1/chat/completions", fields: append(sharedOpenAIFields(),
	field{name: "messages", use: honoured, sub: messageFields, list: true, note: "rendered with the model's chat template"},
	field{name: "max_completion_tokens", use: honoured, note: "overrides max_tokens"},
	field{name: "logprobs", use: honoured, note: "each token's log-probability by the model that produced it (extension: model names it)"},
	field{name: "top_logprobs", use: honoured, note: "0 to 20 most likely tokens per position; needs logprobs"},
	field{name: "response_format", use: honoured, sub: responseFormatFields, note: "text, json_object or json_schema: output valid by construction (see README, Structured output)"},
	field{name: "tools", use: honoured, sub: toolFields, list: true, note: "up to 128 function tools, given to the chat template; calls are read back in its family's format (see DESIGN, Tool calls)"},
	field{name: "tool_choice", use: honoured, sub: toolChoiceFields, note: "none (tools left out of the prompt), auto (default), required, or {\"type\": \"function\", \"function\": {\"name\"}}: required and named force calls whose arguments match the parameters schema"},
	field{name: "parallel_tool_calls", use: honoured, note: "false: at most one call (default true; Llama 3 templates hold one call anyway)"},
	field{name: "functions", use: refused, idle: isEmptyList, note: "the legacy form: use tools"},
	field{name: "function_call", use: refused, idle: []string{`"none"`}, note: "the legacy form: use tool_choice"},
	field{name: "audio", use: refused, note: "text only"},
	field{name: "modalities", use: refused, idle: []string{`["text"]`}, note: "text only"},
	field{name: "prediction", use: refused, note: "predicted outputs are not implemented"},
	field{name: "reasoning_effort", use: refused, note: "no reasoning models"},
	field{name: "verbosity", use: refused, note: "no verbosity control"},
	field{name: "web_search_options", use: refused, note: "no web search"},
	field{name: "store", use: refused, idle: isFalse, note: "completions are not stored"},
	field{name: "metadata", use: noOp, note: "only meaningful with store"},
	field{name: "service_tier", use: noOp, note: "one tier"},
	field{name: "prompt_cache_key", use: noOp},
	field{name: "prompt_cache_retention", use: noOp},
	field{name: "safety_identifier", use: noOp, note: "not recorded"},
)}

// completionFields is the body of /v1/completions.
var completionFields = fieldTable{what: "POST /v1/completions", fields: append(sharedOpenAIFields(),
	field{name: "prompt", use: honoured, note: "a string, a list of one string, token ids, or a list of one list of token ids"},
	field{name: "logprobs", use: honoured, note: "0 to 20: log-probabilities and that many most likely tokens (extension: models)"},
	field{name: "echo", use: refused, idle: isFalse},
	field{name: "best_of", use: refused, idle: isOne, note: "only 1"},
	field{name: "suffix", use: refused, idle: []string{`""`}, note: "no insertion mode"},
)}

// responseFormatFields are the fields of response_format.
var responseFormatFields = []field{
	{name: "type", use: honoured, note: "text, json_object or json_schema"},
	{name: "json_schema", use: honoured, sub: jsonSchemaFields},
}

// jsonSchemaFields are the fields of response_format.json_schema.
var jsonSchemaFields = []field{
	{name: "name", use: noOp},
	{name: "description", use: noOp},
	{name: "schema", use: honoured, note: "the JSON schema the output matches; unsupported keywords are refused naming them"},
	{name: "strict", use: noOp, note: "the output always matches the schema"},
}

// samplingParamFields are the fields of /generate's sampling_params.
var samplingParamFields = []field{
	{name: "max_new_tokens", use: honoured, note: "clamped to the context left when absent"},
	{name: "temperature", use: honoured},
	{name: "top_p", use: honoured},
	{name: "top_k", use: honoured},
	{name: "seed", use: honoured},
	{name: "ignore_eos", use: honoured},
	{name: "stop", use: honoured, note: "up to 4 strings"},
	{name: "frequency_penalty", use: honoured},
	{name: "presence_penalty", use: honoured},
	{name: "repetition_penalty", use: honoured},
	{name: "min_p", use: honoured},
	{name: "logit_bias", use: honoured, note: "token id -> bias"},
	{name: "stop_token_ids", use: honoured},
	{name: "n", use: honoured, note: "n > 1 answers a list of responses (streamed events carry their index)"},
	{name: "json_schema", use: honoured, note: "a JSON schema (or a string holding one) the output matches"},
	{name: "speculate", use: honoured, note: "speculation depth bound: -1 off, 0 the server's, 1 to 64 tokens (output unchanged)"},
}

// generateFields is the body of /generate.
var generateFields = fieldTable{what: "POST /generate", fields: []field{
	{name: "model", use: honoured, note: "a preset name; absent: the first preset"},
	{name: "text", use: honoured, note: "the prompt, tokenized with BOS when the model asks"},
	{name: "input_ids", use: honoured, note: "the prompt as token ids"},
	{name: "messages", use: honoured, sub: messageFields, list: true, note: "a chat, rendered with the preset's template (instead of text or input_ids)"},
	{name: "sampling_params", use: honoured, sub: samplingParamFields},
	{name: "stream", use: honoured},
	{name: "return_logprob", use: honoured, note: "output_token_logprobs: id, logprob and the model that produced it"},
	{name: "top_logprobs_num", use: honoured, note: "0 to 20 most likely tokens per position"},
}}

// tokenizeFields is the body of /tokenize.
var tokenizeFields = fieldTable{what: "POST /tokenize", fields: []field{
	{name: "model", use: honoured, note: "a preset name; absent: the first preset"},
	{name: "prompt", use: honoured, note: "text to encode"},
	{name: "messages", use: honoured, sub: messageFields, list: true, note: "a chat, rendered with the preset's chat template"},
	{name: "add_special_tokens", use: honoured, note: "BOS before a prompt when the tokenizer asks (default true)"},
}}

// detokenizeFields is the body of /detokenize.
var detokenizeFields = fieldTable{what: "POST /detokenize", fields: []field{
	{name: "model", use: honoured, note: "a preset name; absent: the first preset"},
	{name: "tokens", use: honoured, note: "token ids"},
}}
