#!/usr/bin/env python3
"""Writes engines/sample/testdata/jinja_golden.json: renderings of the chat templates in
../shared/testdata/vocab by Python's jinja2, set up as Hugging Face's apply_chat_template sets it
up (a sandboxed environment with trim_blocks and lstrip_blocks, tojson as json.dumps without
ASCII escaping, raise_exception raising the template's message), on seeded random conversations.
engines/sample's TestJinjaGolden renders the same cases with the Go engine and compares byte for
byte.

Given the llama.cpp renderer that scripts/jinja-golden-llamacpp.cpp builds, it also renders every
case with llama.cpp's own Jinja engine and records in each case whether llama.cpp gives the same
text (or raises the same message): "llama_cpp": "agrees", or what llama.cpp gave instead.

Usage: python3 scripts/jinja-golden.py [VOCAB_DIR [LLAMACPP_RENDERER]]   (needs jinja2 >= 3)
"""
import json
import os
import random
import subprocess
import sys
from datetime import datetime

from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment


class Raised(Exception):
    pass


def raise_exception(message):
    raise Raised(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


WORDS = ["Hi", "hello", "Paris", "  padded  ", "line one\nline two", "naïve café", "日本語",
         "<b>html & co</b>", "quote ' and \"", "{{ not a tag }}", "tab\there", "42", "", "\n"]

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                    "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "add", "description": "Adds two <numbers> & more",
     "parameters": {"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "number"}}}}},
]


def text(rng):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))


def conversation(rng, system, tools):
    msgs = []
    if system:
        msgs.append({"role": "system", "content": text(rng)})
    for turn in range(rng.randint(1, 3)):
        msgs.append({"role": "user", "content": text(rng)})
        if tools and rng.random() < 0.6:
            calls = []
            for k in range(rng.randint(1, 2)):
                args = {"city": text(rng), "unit": rng.choice(["c", "f"])} if rng.random() < 0.5 else {"b": rng.randint(-9, 99), "a": 1.5}
                calls.append({"id": "call_%d_%d" % (turn, k), "type": "function",
                              "function": {"name": rng.choice(["get_weather", "add"]), "arguments": args}})
            msgs.append({"role": "assistant", "content": text(rng) if rng.random() < 0.3 else None, "tool_calls": calls})
            for c in calls:
                msgs.append({"role": "tool", "tool_call_id": c["id"], "content": text(rng)})
        msgs.append({"role": "assistant", "content": text(rng)})
    if rng.random() < 0.5:
        msgs.pop()  # end on a user or tool turn
    return msgs


def main():
    vocab = sys.argv[1] if len(sys.argv) > 1 else os.path.join("..", "shared", "testdata", "vocab")
    env = environment()
    rng = random.Random(40)
    cases = []
    specs = [("Qwen-Qwen2.5-7B-Instruct.jinja", "", "<|im_end|>", True),
             ("google-gemma-2-2b-it.jinja", "<bos>", "<eos>", False)]
    for name, bos, eos, tools_ok in specs:
        with open(os.path.join(vocab, name), encoding="utf-8") as f:
            tmpl = env.from_string(f.read())
        for i in range(24):
            system = i % 3 == 0
            tools = TOOLS if tools_ok and i % 2 == 1 else None
            msgs = conversation(rng, system, tools)
            if not tools_ok and i % 5 == 4:
                msgs[len(msgs) // 2]["role"] = rng.choice(["user", "assistant"])  # may break alternation
            gen = i % 4 < 2
            case = {"template": name, "bos_token": bos, "eos_token": eos, "messages": msgs,
                    "add_generation_prompt": gen}
            if tools:
                case["tools"] = tools
            try:
                case["want"] = tmpl.render(messages=msgs, tools=tools, add_generation_prompt=gen,
                                           bos_token=bos, eos_token=eos)
            except Raised as e:
                case["error"] = str(e)
            except TemplateError as e:
                case["error"] = "jinja2: " + str(e)
            cases.append(case)
    if len(sys.argv) > 2:
        check_llama_cpp(sys.argv[2], vocab, cases)
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "engines", "sample", "testdata", "jinja_golden.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out + ".tmp", "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False, indent=1)
        f.write("\n")
    os.replace(out + ".tmp", out)
    print("%d cases, %d errors, llama.cpp agrees on %d -> %s" % (len(cases), sum("error" in c for c in cases),
                                                                 sum(c.get("llama_cpp") == "agrees" for c in cases), out))


def check_llama_cpp(renderer, vocab, cases):
    tmp = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jinja-golden-cases.tmp.json")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False)
    try:
        got = json.loads(subprocess.run([renderer, tmp, vocab], check=True, capture_output=True).stdout)
    finally:
        os.remove(tmp)
    for c, g in zip(cases, got):
        if "want" in c:
            ok = g.get("llama_cpp") == c["want"]
        else:
            ok = g.get("llama_cpp_error", "").endswith("Jinja Exception: " + c["error"])
        c["llama_cpp"] = "agrees" if ok else g


if __name__ == "__main__":
    main()
