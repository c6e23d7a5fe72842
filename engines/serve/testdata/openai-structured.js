// Asks toy serve for structured output through OpenAI's official Node client (the npm package
// openai, found through NODE_PATH): response_format json_schema whole and streamed, json_object,
// and a schema the server refuses.
// Usage: node openai-structured.js BASE_URL SCHEMA. It prints one JSON object of what the client
// got, which TestOpenAIClientStructured checks.
"use strict";
const OpenAI = require("openai");

async function main() {
  const client = new OpenAI({ baseURL: process.argv[2] + "/v1", apiKey: "unused", maxRetries: 0, timeout: 60000 });
  const schema = JSON.parse(process.argv[3]);
  const messages = [{ role: "user", content: "Is it JSON?" }];
  const format = { type: "json_schema", json_schema: { name: "answer", schema, strict: true } };
  const out = {};

  const whole = await client.chat.completions.create({ model: "tiny", messages, max_tokens: 200, temperature: 0, response_format: format });
  const text = whole.choices[0].message.content;
  out.schema = { text, finish: whole.choices[0].finish_reason, parsed: JSON.parse(text) };

  const stream = await client.chat.completions.create({ model: "tiny", messages, max_tokens: 200, temperature: 0, response_format: format, stream: true });
  out.schemaStream = { text: "" };
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (c && c.delta && c.delta.content) out.schemaStream.text += c.delta.content;
    if (c && c.finish_reason) out.schemaStream.finish = c.finish_reason;
  }

  const obj = await client.chat.completions.create({ model: "tiny", messages, max_tokens: 100, temperature: 0, response_format: { type: "json_object" } });
  out.object = { text: obj.choices[0].message.content, finish: obj.choices[0].finish_reason };
  if (out.object.finish === "stop") out.object.parsed = JSON.parse(out.object.text);

  try {
    await client.chat.completions.create({ model: "tiny", messages, max_tokens: 5,
      response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "string", pattern: "^a+$" } } } });
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
