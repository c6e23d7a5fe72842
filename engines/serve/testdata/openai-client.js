// Drives toy serve with OpenAI's official Node client (the npm package openai, found through
// NODE_PATH): the model list and the model, a chat completion, a text completion, both
// streamed, and three refused requests.
// Usage: node openai-client.js BASE_URL. It prints one JSON object of what the client parsed,
// which TestOpenAIClient compares with the server's own replies.
"use strict";
const OpenAI = require("openai");

async function main() {
  const client = new OpenAI({ baseURL: process.argv[2] + "/v1", apiKey: "unused", maxRetries: 0, timeout: 60000 });
  const out = { version: require("openai/version").VERSION };

  const models = await client.models.list();
  out.models = models.data.map((m) => m.id);
  out.retrieved = (await client.models.retrieve("tiny")).id;

  const chat = await client.chat.completions.create({
    model: "tiny", messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello" }],
    max_tokens: 5, temperature: 0,
  });
  out.chat = { text: chat.choices[0].message.content, role: chat.choices[0].message.role,
    finish: chat.choices[0].finish_reason, usage: chat.usage, object: chat.object };

  const cmpl = await client.completions.create({ model: "tiny", prompt: "func main", max_tokens: 6, temperature: 0 });
  out.completion = { text: cmpl.choices[0].text, finish: cmpl.choices[0].finish_reason, usage: cmpl.usage };

  const chatStream = await client.chat.completions.create({
    model: "tiny", messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello" }],
    max_tokens: 5, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  out.chatStream = { text: "", chunks: 0 };
  for await (const chunk of chatStream) {
    out.chatStream.chunks++;
    const c = chunk.choices[0];
    if (c && c.delta && c.delta.content) out.chatStream.text += c.delta.content;
    if (c && c.finish_reason) out.chatStream.finish = c.finish_reason;
    if (chunk.usage) out.chatStream.usage = chunk.usage;
  }

  const cmplStream = await client.completions.create({ model: "tiny", prompt: "func main", max_tokens: 6, temperature: 0, stream: true });
  out.completionStream = { text: "", chunks: 0 };
  for await (const chunk of cmplStream) {
    out.completionStream.chunks++;
    const c = chunk.choices[0];
    if (c) out.completionStream.text += c.text;
    if (c && c.finish_reason) out.completionStream.finish = c.finish_reason;
  }

  // Errors come back as the client's typed errors, with the server's status and message.
  out.errors = [];
  for (const req of [
    { model: "nope", prompt: "x", max_tokens: 2 },
    { model: "tiny", prompt: "x", max_tokens: 0 },
    { model: "tiny", prompt: "x", max_tokens: 2, suffix: "y" },
  ]) {
    try {
      await client.completions.create(req);
      out.errors.push({ status: 0 });
    } catch (e) {
      out.errors.push({ status: e.status, class: e.constructor.name, type: e.type, message: e.message });
    }
  }
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(1);
});
