// Fuzz smoke test for chat templates: mutated and random template sources rendered with random JSON
// variables must only ever throw tern::Error, each within a bounded time (a short in-suite run of
// what tests/fuzz/text_template_fuzz.cpp does for longer under libFuzzer).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tern/base/error.h"
#include "tern/text/chat_template.h"

namespace tern::text {
namespace {

using nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

const char* const kFragments[] = {
    "{{", "}}", "{%", "%}", "{#", "#}", "{%-", "-%}", "{{-", "-}}", "{%+", " if ", " else ", " elif ", " endif ",
    " for ", " in ", " endfor ", " set ", " endset ", " macro ", " endmacro ", " call ", " endcall ", " raw ",
    " endraw ", " filter ", " endfilter ", " break ", " continue ", "loop.index", "loop.last", "loop.cycle(1,2)",
    "messages", "messages[0]", "messages[::-1]", "m.content", "m['role']", "ns.x", "namespace(x=1)", "range(99999)",
    "|tojson", "|tojson(indent=2)", "|trim", "|length", "|join(',')", "|map(attribute='role')", "|selectattr('role')",
    "|default('d', true)", "|list", "|first", "|last", "|int", "|string", "|indent(2)", "|replace('a','b')",
    " is defined", " is not none", " is string", " is iterable", " is mapping", " is divisibleby 3",
    ".split('a')", ".strip()", ".startswith('x')", ".items()", ".get('k', 1)", ".format(1)", "'%s' % 3",
    " ~ ", " + ", " - ", " * ", " / ", " // ", " % ", " ** ", " and ", " or ", " not ", " == ", " != ", " < ",
    "(", ")", "[", "]", "{", "}", ",", ":", ".", "|", "'", "\"", "\\", "\n", "  ", "0", "-1", "1e300", "9223372036854775807",
    "'x' * 99999", "[1] * 99999", "raise_exception('boom')", "caller()", "varargs", "kwargs", "\xff\xfe", "\xe2\x80\xa8",
};

std::vector<std::string> seeds() {
  std::vector<std::string> out = {
      "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{% endfor %}{% if add_generation_prompt %}<|a|>{% endif %}",
      "{%- set ns = namespace(i=0) -%}{%- for m in messages[::-1] if m.role -%}{%- set ns.i = ns.i + loop.index -%}"
      "{{ m.content | tojson }}{%- else -%}none{%- endfor -%}{{ ns.i }}",
      "{% macro f(a, b=[1, {'k': none}]) %}{{ a ~ b | tojson }}{{ caller() if caller is defined }}{% endmacro %}"
      "{% call f(1) %}body{% endcall %}{{ f('x', b=tools) }}",
      "{{ (messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | list)[-1:] | join('\\n') | trim }}",
      "{% raw %}{{ x }}{% endraw %}{# c #}{{ '%d-%s' % (1, 'a') }}{{ 'a{}b'.format(messages | length) }}",
  };
  const std::string dir = std::string(TERN_SOURCE_DIR) + "/tests/fuzz/corpus/text_template";
  if (std::filesystem::exists(dir)) {
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      std::ifstream in(e.path(), std::ios::binary);
      std::ostringstream ss;
      ss << in.rdbuf();
      out.push_back(ss.str());
    }
  }
  return out;
}

ordered_json random_value(std::mt19937& rng, int depth) {
  switch (rng() % (depth > 3 ? 5 : 8)) {
    case 0: return nullptr;
    case 1: return rng() % 2 == 0;
    case 2: return static_cast<int64_t>(rng() % 2001) - 1000;
    case 3: return std::ldexp(static_cast<double>(rng() % 1000), static_cast<int>(rng() % 40) - 20);
    case 4: {
      static const char* const kStrings[] = {"", "user", "assistant", "system", "tool", "<think>a</think>b", "  x  ",
                                             "Zürich \xe2\x80\xa8 \xf0\x9f\x98\x80", "{{ not code }}", "a\nb\n"};
      return kStrings[rng() % std::size(kStrings)];
    }
    case 5:
    case 6: {
      ordered_json o = ordered_json::object();
      static const char* const kKeys[] = {"role", "content", "tool_calls", "function", "name", "arguments", "type", "text"};
      for (int i = static_cast<int>(rng() % 4); i >= 0; --i) o[kKeys[rng() % std::size(kKeys)]] = random_value(rng, depth + 1);
      return o;
    }
    default: {
      ordered_json a = ordered_json::array();
      for (int i = static_cast<int>(rng() % 4); i > 0; --i) a.push_back(random_value(rng, depth + 1));
      return a;
    }
  }
}

ordered_json random_vars(std::mt19937& rng) {
  ordered_json v = ordered_json::object();
  ordered_json messages = ordered_json::array();
  for (int i = static_cast<int>(rng() % 5); i > 0; --i) {
    static const char* const kRoles[] = {"user", "assistant", "system", "tool"};
    ordered_json m = {{"role", kRoles[rng() % 4]}, {"content", random_value(rng, 2)}};
    if (rng() % 4 == 0) m["tool_calls"] = random_value(rng, 2);
    messages.push_back(m);
  }
  v["messages"] = rng() % 10 == 0 ? random_value(rng, 0) : messages;
  v["tools"] = random_value(rng, 1);
  v["add_generation_prompt"] = rng() % 2 == 0;
  if (rng() % 2) v["enable_thinking"] = random_value(rng, 3);
  return v;
}

std::string mutate(std::mt19937& rng, std::string s) {
  for (int k = static_cast<int>(rng() % 6); k >= 0; --k) {
    size_t pos = s.empty() ? 0 : rng() % (s.size() + 1);
    switch (rng() % 5) {
      case 0: s.insert(pos, kFragments[rng() % std::size(kFragments)]); break;
      case 1:
        if (!s.empty() && pos < s.size()) s.erase(pos, 1 + rng() % 8);
        break;
      case 2:
        if (!s.empty() && pos < s.size()) s[pos] = static_cast<char>(rng() % 256);
        break;
      case 3:
        if (!s.empty() && pos < s.size()) {
          size_t len = 1 + rng() % std::min<size_t>(64, s.size() - pos);
          s.insert(rng() % (s.size() + 1), s.substr(pos, len));
        }
        break;
      default: s.insert(pos, 1, "{}%#-+|()[]'\" \n"[rng() % 15]); break;
    }
  }
  return s;
}

TEST(JinjaFuzzSmoke, MutatedTemplatesOnlyThrowTernErrors) {
  TemplateLimits limits;
  limits.max_steps = 200000;
  limits.max_output_bytes = 1 << 20;
  limits.max_depth = 100;
  std::mt19937 rng(20240611);
  const std::vector<std::string> base = seeds();
  const auto deadline = Clock::now() + std::chrono::seconds(8);
  int runs = 0, rendered = 0;
  double worst_ms = 0;
  for (; runs < 4000 && Clock::now() < deadline; ++runs) {
    std::string src = rng() % 8 == 0 ? std::string() : base[rng() % base.size()];
    src = mutate(rng, src);
    if (rng() % 3 == 0) src = mutate(rng, src);
    ordered_json vars = random_vars(rng);
    auto start = Clock::now();
    try {
      ChatTemplate t = ChatTemplate::parse(src, limits);
      t.render(vars);
      ++rendered;
    } catch (const Error&) {
    } catch (const std::exception& e) {
      ADD_FAILURE() << "non-tern exception " << e.what() << " for template:\n" << src;
    } catch (...) {
      ADD_FAILURE() << "unknown exception for template:\n" << src;
    }
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    worst_ms = std::max(worst_ms, ms);
    EXPECT_LT(ms, 2000) << "slow template:\n" << src;
  }
  EXPECT_GT(runs, 100);
  EXPECT_GT(rendered, 0);
  RecordProperty("runs", runs);
  RecordProperty("rendered", rendered);
  RecordProperty("worst_ms", static_cast<int>(worst_ms));
}

TEST(JinjaFuzzSmoke, RandomBytesOnlyThrowTernErrors) {
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::string src(rng() % 64, '\0');
    for (auto& c : src) c = static_cast<char>(rng() % 4 == 0 ? "{}%#-"[rng() % 5] : rng() % 256);
    try {
      ChatTemplate::parse(src).render(random_vars(rng));
    } catch (const Error&) {
    } catch (...) {
      ADD_FAILURE() << "non-tern exception for random template of " << src.size() << " bytes";
    }
  }
}

// Left-nested chains as long as the template (a ~ b ~ c ..., x.a.b ..., x|f|g ..., f(1)(1) ...) parse
// without recursion; rendering them stops at the nesting limit with a tern::Error, and the tree is
// released without following the chain down the stack (each of these crashed a 300,000-link chain).
TEST(JinjaFuzzSmoke, LongChainsAreErrorsNotCrashes) {
  const int n = 300000;
  auto repeat = [](const std::string& s, int k) {
    std::string out;
    out.reserve(s.size() * k);
    for (int i = 0; i < k; ++i) out += s;
    return out;
  };
  const std::string chains[] = {"{{ 1" + repeat("~1", n) + " }}",       "{{ 'a'" + repeat("|trim", n) + " }}",
                                "{{ 1" + repeat("+1", n) + " }}",       "{{ true" + repeat(" or true", n) + " }}",
                                "{{ range" + repeat("(1)", n) + " }}",  "{{ x" + repeat(".a", n) + " }}",
                                "{{ x" + repeat("[0]", n) + " }}",      "{{ 2" + repeat("**2", n) + " }}"};
  for (const std::string& src : chains) {
    try {
      ChatTemplate::parse(src).render(ordered_json::object());
      ADD_FAILURE() << "rendered " << src.substr(0, 20);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("nested"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace tern::text
