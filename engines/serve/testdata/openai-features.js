// Asks toy serve for log-probabilities, several choices and embeddings through OpenAI's
// official Node client (the npm package openai, found through NODE_PATH), whole and streamed.
// Usage: node openai-features.js BASE_URL. It prints one JSON object of what the client got,
// which TestOpenAIClientFeatures checks.
"use strict";
const OpenAI = require("openai");

async function main() {
  const client = new OpenAI({ baseURL: process.argv[2] + "/v1", apiKey: "unused", maxRetries: 0, timeout: 60000 });
  const messages = [{ role: "user", content: "Hello" }];
  const out = {};

  // Chat log-probabilities.
  const chat = await client.chat.completions.create({ model: "tiny", messages, max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 3 });
  out.chatLogprobs = chat.choices[0].logprobs.content;
  const chatStream = await client.chat.completions.create({ model: "tiny", messages, max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 3, stream: true });
  out.chatLogprobsStream = [];
  for await (const chunk of chatStream) {
    for (const c of chunk.choices) if (c.logprobs && c.logprobs.content) out.chatLogprobsStream.push(...c.logprobs.content);
  }

  // Text completion log-probabilities (the legacy shape).
  const cmpl = await client.completions.create({ model: "tiny", prompt: "func main", max_tokens: 6, temperature: 0, logprobs: 3 });
  out.completionLogprobs = cmpl.choices[0].logprobs;
  const cmplStream = await client.completions.create({ model: "tiny", prompt: "func main", max_tokens: 6, temperature: 0, logprobs: 3, stream: true });
  out.completionLogprobsStream = { tokens: [], token_logprobs: [] };
  for await (const chunk of cmplStream) {
    for (const c of chunk.choices) {
      if (!c.logprobs) continue;
      out.completionLogprobsStream.tokens.push(...c.logprobs.tokens);
      out.completionLogprobsStream.token_logprobs.push(...c.logprobs.token_logprobs);
    }
  }

  // Several choices, with a seed.
  const sampling = { temperature: 1.2, top_p: 1, seed: 40, n: 3, max_tokens: 8 };
  const many = await client.chat.completions.create({ model: "tiny", messages, ...sampling, top_k: 0, min_p: 0 });
  out.chatChoices = many.choices.map((c) => ({ index: c.index, text: c.message.content, finish: c.finish_reason }));
  out.chatChoicesUsage = many.usage;
  const manyStream = await client.chat.completions.create({ model: "tiny", messages, ...sampling, top_k: 0, min_p: 0, stream: true });
  out.chatChoicesStream = ["", "", ""];
  for await (const chunk of manyStream) {
    for (const c of chunk.choices) if (c.delta && c.delta.content) out.chatChoicesStream[c.index] += c.delta.content;
  }
  const manyCmpl = await client.completions.create({ model: "tiny", prompt: "func main", ...sampling, top_k: 0, min_p: 0 });
  out.completionChoices = manyCmpl.choices.map((c) => ({ index: c.index, text: c.text, finish: c.finish_reason }));
  const manyCmplStream = await client.completions.create({ model: "tiny", prompt: "func main", ...sampling, top_k: 0, min_p: 0, stream: true });
  out.completionChoicesStream = ["", "", ""];
  for await (const chunk of manyCmplStream) {
    for (const c of chunk.choices) out.completionChoicesStream[c.index] += c.text;
  }

  // Embeddings: the client asks for base64 by default and decodes it; floats when asked.
  const inputs = ["func main() { return nil }", "Hello, world!"];
  const embDefault = await client.embeddings.create({ model: "tiny", input: inputs });
  out.embeddings = embDefault.data.map((d) => Array.from(d.embedding));
  out.embeddingsUsage = embDefault.usage;
  const embFloat = await client.embeddings.create({ model: "tiny", input: inputs, encoding_format: "float" });
  out.embeddingsFloat = embFloat.data.map((d) => d.embedding);

  try {
    await client.chat.completions.create({ model: "tiny", messages, max_tokens: 2, n: 17 });
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
