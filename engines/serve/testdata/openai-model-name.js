// Drives a toy serve that serves any model name (serve.Config.AnyModelName) with OpenAI's
// official Node client, naming a model it does not have, as many clients do by default: the
// model list, a chat completion and a text completion, whole and streamed.
// Usage: node openai-model-name.js BASE_URL MODEL. It prints one JSON object of what the client
// parsed, which TestOpenAIClientAnyModelName compares with the server's own replies.
"use strict";
const OpenAI = require("openai");

async function main() {
  const client = new OpenAI({ baseURL: process.argv[2] + "/v1", apiKey: "unused", maxRetries: 0, timeout: 60000 });
  const model = process.argv[3];
  const out = { models: (await client.models.list()).data.map((m) => m.id) };
  const messages = [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello" }];

  const chat = await client.chat.completions.create({ model, messages, max_tokens: 5, temperature: 0 });
  out.chat = { text: chat.choices[0].message.content, model: chat.model };
  const cmpl = await client.completions.create({ model, prompt: "func main", max_tokens: 6, temperature: 0 });
  out.completion = { text: cmpl.choices[0].text, model: cmpl.model };

  const chatStream = await client.chat.completions.create({ model, messages, max_tokens: 5, temperature: 0, stream: true });
  out.chatStream = { text: "" };
  for await (const chunk of chatStream) {
    const c = chunk.choices[0];
    if (c && c.delta && c.delta.content) out.chatStream.text += c.delta.content;
    out.chatStream.model = chunk.model;
  }
  const cmplStream = await client.completions.create({ model, prompt: "func main", max_tokens: 6, temperature: 0, stream: true });
  out.completionStream = { text: "" };
  for await (const chunk of cmplStream) {
    if (chunk.choices[0]) out.completionStream.text += chunk.choices[0].text;
    out.completionStream.model = chunk.model;
  }
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(1);
});
