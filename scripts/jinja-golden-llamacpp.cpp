// Renders the cases of engines/sample/testdata/jinja_golden.json with llama.cpp's own Jinja
// engine (its common/jinja), set up as llama.cpp's common_chat_template_direct_apply sets it up
// (messages, bos_token, eos_token, tools when given, add_generation_prompt when true), and
// writes {"llama_cpp": text} or {"llama_cpp_error": message} per case as a JSON array on stdout.
// scripts/jinja-golden.py runs it and records whether llama.cpp agrees with jinja2.
//
// Build, with L a llama.cpp checkout (one with common/jinja, 2026):
//   g++ -std=c++17 -O1 -I$L/common -I$L/vendor scripts/jinja-golden-llamacpp.cpp \
//       $L/common/jinja/*.cpp $L/common/unicode.cpp -o jinja-golden-llamacpp
// Usage: jinja-golden-llamacpp CASES.json TEMPLATE_DIR
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include "jinja/lexer.h"
#include "jinja/parser.h"
#include "jinja/runtime.h"
#include "jinja/value.h"

using ojson = nlohmann::ordered_json;

int main(int argc, char ** argv) {
    std::ifstream in(argv[1]);
    ojson cases = ojson::parse(in);
    std::string dir = argv[2];
    ojson out = ojson::array();
    for (auto & c : cases) {
        std::string name = c["template"];
        std::ifstream tf(dir + "/" + name);
        std::string src((std::istreambuf_iterator<char>(tf)), std::istreambuf_iterator<char>());
        ojson r;
        try {
            jinja::lexer lexer;
            auto lr = lexer.tokenize(src);
            jinja::program prog = jinja::parse_from_tokens(lr);
            jinja::context ctx(lr.source);
            ojson inp = ojson{{"messages", c["messages"]}, {"bos_token", c["bos_token"]}, {"eos_token", c["eos_token"]}};
            if (c.contains("tools")) inp["tools"] = c["tools"];
            if (c["add_generation_prompt"].get<bool>()) inp["add_generation_prompt"] = true;
            jinja::global_from_json(ctx, inp, false);
            jinja::runtime runtime(ctx);
            const jinja::value results = runtime.execute(prog);
            auto parts = jinja::runtime::gather_string_parts(results);
            r["llama_cpp"] = parts->as_string().str();
        } catch (const std::exception & e) {
            r["llama_cpp_error"] = e.what();
        }
        out.push_back(r);
    }
    std::cout << out.dump(1) << "\n";
}
