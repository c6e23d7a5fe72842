// Calls toy serve with tools through OpenAI's official Node client (the npm package openai,
// found through NODE_PATH): a named function and "required", whole; the named function streamed
// through the client's stream helper, which puts the deltas back together itself; runTools,
// which parses a call's arguments, runs the function and sends its answer back; the
// conversation that leaves, sent again; and a schema the server refuses.
// Usage: node openai-tools.js BASE_URL TOOLS. It prints one JSON object of what the client got,
// which TestOpenAIClientTools checks.
"use strict";
const OpenAI = require("openai");

async function main() {
  const client = new OpenAI({ baseURL: process.argv[2] + "/v1", apiKey: "unused", maxRetries: 0, timeout: 60000 });
  const tools = JSON.parse(process.argv[3]);
  const messages = [{ role: "user", content: "What is the weather in Paris?" }];
  const named = { type: "function", function: { name: "get_weather" } };
  const params = { model: "tiny", messages, tools, tool_choice: named, parallel_tool_calls: false, max_tokens: 300, temperature: 0 };
  const reply = (c) => ({ finish: c.choices[0].finish_reason, content: c.choices[0].message.content, toolCalls: c.choices[0].message.tool_calls || [] });
  const out = {};

  out.whole = reply(await client.chat.completions.create(params));
  out.required = reply(await client.chat.completions.create({ ...params, tool_choice: "required" }));

  const stream = client.chat.completions.stream(params);
  let toolDeltas = 0;
  stream.on("chunk", (chunk) => {
    const d = chunk.choices[0] && chunk.choices[0].delta;
    if (d && d.tool_calls) toolDeltas += d.tool_calls.length;
  });
  out.stream = reply(await stream.finalChatCompletion());
  out.stream.toolDeltas = toolDeltas;

  const called = [];
  const weather = tools.find((t) => t.function.name === "get_weather").function;
  const runner = client.chat.completions.runTools({
    ...params,
    tools: [{ type: "function", function: { name: "get_weather", parameters: weather.parameters, parse: JSON.parse,
      function: (args) => { called.push(args); return { temp: 21 }; } } }],
  });
  await runner.done();
  out.runTools = { called, messages: runner.messages };

  const after = await client.chat.completions.create({ model: "tiny", messages: runner.messages, tools, tool_choice: "none", max_tokens: 5, temperature: 0 });
  out.roundTrip = { ...reply(after), usage: after.usage };

  try {
    await client.chat.completions.create({ ...params, tools: [{ type: "function", function: { name: "f", parameters: { type: "object", properties: { s: { type: "string", pattern: "^a" } } } } }], tool_choice: "required" });
    out.refused = { status: 0 };
  } catch (e) {
    out.refused = { status: e.status, class: e.constructor.name, message: e.message };
  }
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(1);
});
