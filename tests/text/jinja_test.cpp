// Jinja interpreter features (whitespace control, expressions, statements, filters, tests, methods,
// undefined semantics, errors) against renders of the same templates by Python Jinja2.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tern/base/error.h"
#include "tern/text/chat_template.h"

namespace tern::text {
namespace {

struct Case {
  const char* src;
  const char* expected;  // nullptr: Python raised, so tern must throw tern::Error
  bool is_error;
};

// The variables every case renders with.
const char* const kVars =
    R"JSON({"xs": [1, 2, 3], "d": {"a": 1, "b": [1, 2], "c": null}, "s": "héllo wörld", "n": null, "t": true, "f": 1.5, "msgs": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo", "x": 1}], "words": ["b", "A", "c", "a"]})JSON";

// Every expected string below was produced by Python Jinja2 3.1.6 rendering the same source with
// ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]) plus
// HF's tojson (json.dumps, ensure_ascii=False) and raise_exception, i.e. transformers' environment.
const Case kWhitespace[] = {
    {"a\n  {% if t %}\n  yes\n  {% endif %}\nb",
     "a\n  yes\nb", false},
    {"a  {%- if t -%}  yes  {%- endif -%}  b",
     "ayesb", false},
    {"{% for x in xs %}\n  {{ x }}\n{% endfor %}\n",
     "  1\n  2\n  3\n", false},
    {"  {{ 1 }}  \n  {% if t %}x{% endif %}\n",
     "  1  \nx", false},
    {"{%+ if t %}  x  {% endif +%}\ny",
     "  x  \ny", false},
    {"a {# comment #} b\n  {# c2 #}\nc {#- c3 -#}   d",
     "a  b\ncd", false},
    {"{% raw %}{{ not parsed }}{% endraw %}\nz",
     "{{ not parsed }}z", false},
    {"x\n{%- raw -%}\n  {{ a }}  \n{%- endraw %}\ny",
     "x{{ a }}y", false},
    {"line1\015\nline2\015\n",
     "line1\nline2", false},
    {"trailing\n",
     "trailing", false},
    {"trailing\n\n",
     "trailing\n", false},
    {"{{ '{{' }} {{ {'a': {'b': 1}} }}",
     "{{ {'a': {'b': 1}}", false},
    {"  {{- 'x' -}}  ",
     "x", false},
    {"{% if t %}\n\n{% endif %}",
     "\n", false},
    {"\t{% if t %}a{% endif %}\t\n",
     "a\t", false},
    {"{% if t %}a{% endif %}   {% if t %}b{% endif %}",
     "a   b", false},
};

const Case kExpressions[] = {
    {"{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}",
     "7 9 64 4 3 -4 1 2 3.0 0.5", false},
    {"{{ 1 / 3 }} {{ 10 / 2 }} {{ 1e300 * 1e10 }} {{ 0.1 + 0.2 }} {{ 1e-7 }} {{ 123456789.123 }} {{ 1e16 }} {{ 1e15 }} {{ 2.5e-5 }}",
     "0.3333333333333333 5.0 inf 0.30000000000000004 1e-07 123456789.123 1e+16 1000000000000000.0 2.5e-05", false},
    {"{{ 'a' ~ 1 ~ none ~ true ~ [1] }} {{ 'a' + 'b' }} {{ [1] + [2, 3] }} {{ 'ab' * 3 }} {{ 3 * [0] }}",
     "a1NoneTrue[1] ab [1, 2, 3] ababab [0, 0, 0]", false},
    {"{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' != 'b' }}",
     "True False True True True True True", false},
    {"{{ 1 in xs }} {{ 5 not in xs }} {{ 'a' in d }} {{ 'ell' in 'hello' }} {{ not 1 in xs }} {{ 'z' in n|default('', true) }}",
     "True True True True False False", false},
    {"{{ t and 'yes' or 'no' }} {{ n or 'dflt' }} {{ 0 and 1 }} {{ [] or {} }} {{ not n }}",
     "yes dflt 0 {} True", false},
    {"{{ 'a' if t else 'b' }} {{ 'a' if n else 'b' }} [{{ 'a' if n }}] {{ 1 if t else 2 if n else 3 }}",
     "a b [] 1", false},
    {"{{ xs[0] }} {{ xs[-1] }} {{ xs[1:] }} {{ xs[:-1] }} {{ xs[::-1] }} {{ xs[::2] }} {{ xs[5] }} {{ xs[-5:] }} {{ xs[1:100] }}",
     "1 3 [2, 3] [1, 2] [3, 2, 1] [1, 3]  [1, 2, 3] [2, 3]", false},
    {"{{ s[1] }} {{ s[-1] }} {{ s[::-1] }} {{ s[2:5] }} {{ s|length }} {{ s[100] }}|",
     "é d dlröw olléh llo 11 |", false},
    {"{{ d.a }} {{ d['b'][1] }} {{ d.c }} {{ d.zz }}|{{ d['zz'] }}|{{ msgs[1].x }} {{ msgs.0.role }}",
     "1 2 None ||1 user", false},
    {"{{ d }} {{ xs }} {{ (1, 2) }} {{ (1,) }} {{ () }} {{ n }} {{ t }} {{ 'q\"s' }} {{ [\"it's\"] }} {{ {'k': 'v\\n'} }}",
     "{'a': 1, 'b': [1, 2], 'c': None} [1, 2, 3] (1, 2) (1,) () None True q\"s [\"it's\"] {'k': 'v\\n'}", false},
    {"{{ \"\\t\\x41\\u00e9\\n\" }}|{{ 'a\\qb' }}|{{ 'ab' 'cd' }}",
     "\tAé\n|a\\qb|abcd", false},
    {"{{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 1_000 }} {{ 1.5e3 }}",
     "31 15 5 1000 1500.0", false},
    {"{% set a = 1 %}{% set b, c = [2, 3] %}{{ a }}{{ b }}{{ c }}",
     "123", false},
};

const Case kStatements[] = {
    {"{% set x %}inner {{ 1 + 1 }}{% endset %}[{{ x }}]",
     "[inner 2]", false},
    {"{% set x | upper %}inner{% endset %}[{{ x }}]",
     "[INNER]", false},
    {"{% set ns = namespace(a=1, b='x') %}{% for i in xs %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }} {{ ns.b }} {{ ns.zz }}|",
     "7 x |", false},
    {"{% set c = 0 %}{% for i in xs %}{% set c = c + i %}{{ c }}{% endfor %}{{ c }}",
     "1230", false},
    {"{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
     "1032TrueFalse3;2121FalseFalse3;3210FalseTrue3;", false},
    {"{% for x in xs %}{{ loop.previtem }}-{{ loop.nextitem }}|{{ loop.cycle('a', 'b') }};{% endfor %}",
     "-2|a;1-3|b;2-|a;", false},
    {"{% for x in [] %}a{% else %}empty{% endfor %}",
     "empty", false},
    {"{% for x in xs if x > 1 %}{{ x }}{{ loop.length }}{% else %}none{% endfor %}",
     "2232", false},
    {"{% for x in xs %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}{% if x == 3 %}{% break %}{% endif %}{% endfor %}",
     "13", false},
    {"{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}",
     "a=1;b=[1, 2];c=None;", false},
    {"{% for k in d %}{{ k }}{% endfor %}{% for ch in 'abc' %}{{ ch }},{% endfor %}",
     "abca,b,c,", false},
    {"{% for a in xs %}{% for b in xs %}{{ loop.index }}{% endfor %}{{ loop.index }}|{% endfor %}",
     "1231|1232|1233|", false},
    {"{% if n %}a{% elif t %}b{% else %}c{% endif %}",
     "b", false},
    {"{% macro m(a, b=2, c='x') %}{{ a }}-{{ b }}-{{ c }}{% endmacro %}{{ m(1) }} {{ m(1, 3) }} {{ m(1, c='y') }} {{ m() }}|",
     "1-2-x 1-3-x 1-2-y -2-x|", false},
    {"{% macro outer() %}[{{ caller() }}]{% endmacro %}{% call outer() %}body{% endcall %}",
     "[body]", false},
    {"{% macro rec(n) %}{% if n > 0 %}{{ n }}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(5) }}",
     "54321", false},
    {"{% filter upper %}hello {{ 'x' }}{% endfilter %}",
     "HELLO X", false},
    {"{% with a = 5 %}{{ a }}{% endwith %}{{ a }}|",
     "5|", false},
    {"{{ d|tojson }} {{ xs|tojson }} {{ 'é\"\\n'|tojson }} {{ n|tojson }} {{ 1.0|tojson }} {{ {'a': [1, {'b': none}]}|tojson(indent=2) }}",
     "{\"a\": 1, \"b\": [1, 2], \"c\": null} [1, 2, 3] \"é\\\"\\n\" null 1.0 {\n  \"a\": [\n    1,\n    {\n      \"b\": null\n    }\n  ]\n}", false},
};

const Case kFilters[] = {
    {"{{ {}|tojson }} {{ []|tojson(indent=2) }} {{ {'a': {}}|tojson(indent=1) }} {{ d|tojson(sort_keys=true) }} {{ 'ü'|tojson(ensure_ascii=true) }}",
     "{} [] {\n \"a\": {}\n} {\"a\": 1, \"b\": [1, 2], \"c\": null} \"\\u00fc\"", false},
    {"{{ '  x  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ xs|length }} {{ d|length }} {{ 'abc'|list }} {{ xs|join(', ') }} {{ xs|join }}",
     "x|a|3 3 ['a', 'b', 'c'] 1, 2, 3 123", false},
    {"{{ n|default('d') }} {{ undefined_var|default('d') }} {{ ''|default('d', true) }} {{ 0|default('d', boolean=true) }} {{ undefined_var|d }}|",
     "None d d d |", false},
    {"{{ d|items|list }} {{ msgs|selectattr('role', 'equalto', 'user')|list }} {{ msgs|rejectattr('x', 'defined')|list }}",
     "[('a', 1), ('b', [1, 2]), ('c', None)] [{'role': 'user', 'content': 'hi'}] [{'role': 'user', 'content': 'hi'}]", false},
    {"{{ msgs|map(attribute='role')|list }} {{ words|map('upper')|join }} {{ msgs|selectattr('x')|map(attribute='content')|first }}",
     "['user', 'assistant'] BACA yo", false},
    {"{{ xs|first }} {{ xs|last }} {{ 'abc'|first }} {{ []|first }}| {{ 'Hello World'|upper }} {{ 'ABC'|lower }} {{ 'hello world'|title }} {{ 'hELLO'|capitalize }}",
     "1 3 a | HELLO WORLD abc Hello World Hello", false},
    {"{{ 'aXbXc'|replace('X', '-') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ 3.9|int }} {{ '0x1A'|int(base=16) }}",
     "a-b-c bba 42 4 0 7 3 26", false},
    {"{{ 42|string }} {{ [1]|string }} {{ 'a\nb\n\nc'|indent }}|{{ 'a\nb'|indent(2, true) }}|{{ 'a\n\nb'|indent(width='> ', blank=true) }}",
     "42 [1] a\n    b\n\n    c|  a\n  b|a\n> \n> b", false},
    {"{{ '<a href=\"x\">'|e }} {{ '<b>'|safe }} {{ -3|abs }} {{ 2.567|round(1) }} {{ 2.5|round }} {{ 3|round }} {{ words|sort }} {{ words|sort(case_sensitive=true) }}",
     "&lt;a href=&#34;x&#34;&gt; <b> 3 2.6 2.0 3 ['A', 'a', 'b', 'c'] ['A', 'a', 'b', 'c']", false},
    {"{{ words|unique|list }} {{ xs|sum }} {{ xs|max }} {{ words|min }} {{ xs|reverse|list }} {{ 'abc'|reverse }} {{ d|dictsort }} {{ xs|select('odd')|list }} {{ xs|reject('even')|list }}",
     "['b', 'A', 'c'] 6 3 A [3, 2, 1] cba [('a', 1), ('b', [1, 2]), ('c', None)] [1, 3] [1, 3]", false},
    {"{{ '%s-%d'|format('a', 3) }} {{ '%05.1f'|format(3.14159) }} {{ '%s' % 'x' }} {{ '%s and %s' % ('a', 'b') }} {{ '%(a)s' % d }}",
     "a-3 003.1 x a and b 1", false},
    {"{{ 'abc'|center(9) }}|{{ 'one two  three'|wordcount }} {{ xs|count }} {{ d|attr('a') }}|{{ msgs|map(attribute='zz', default='D')|list }}",
     "   abc   |3 3 |['D', 'D']", false},
    {"{{ n is none }} {{ xs is iterable }} {{ d is mapping }} {{ s is string }} {{ 1 is number }} {{ 1.5 is float }} {{ 1 is integer }} {{ t is boolean }} {{ t is true }} {{ t is false }} {{ xs is sequence }} {{ u is defined }} {{ u is undefined }} {{ 2 is even }} {{ 3 is odd }} {{ 9 is divisibleby 3 }} {{ 'ab' is lower }} {{ 'AB' is upper }} {{ 1 is in xs }} {{ 1 is eq 1 }} {{ 2 is gt 1 }} {{ n is not none }} {{ u is iterable }} {{ range is callable }} {{ 1 is sameas 1 }} {{ 'upper' is filter }} {{ 'odd' is test }}",
     "True True True True True True True True True False True False True True True True True True True True True False True True True True True", false},
};

const Case kTests[] = {
    {"{{ s.startswith('hé') }} {{ s.endswith(('x', 'ld')) }} {{ '  a  '.strip() }}|{{ 'xxaxx'.lstrip('x') }}|{{ 'xxaxx'.rstrip('x') }}|{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(None, 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ '  a b  c '.split(maxsplit=1) }}",
     "True True a|axx|xxa|['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b c'] ['a,b', 'c'] ['a', 'b  c ']", false},
};

const Case kMethods[] = {
    {"{{ 'aXa'.replace('a', 'b') }} {{ 'ab'.replace('', '-') }} {{ 'Ab'.lower() }} {{ 'ab'.upper() }} {{ 'hello wORLD'.title() }} {{ 'abc'.find('c') }} {{ 'abc'.find('z') }} {{ 'aaa'.count('a') }} {{ '-'.join(['a', 'b']) }} {{ '{} and {}'.format(1, 'x') }} {{ '{0}{name}'.format('a', name='b') }}",
     "bXb -a-b- ab AB Hello World 2 -1 3 a-b 1 and x ab", false},
    {"{{ d.get('a') }} {{ d.get('zz') }} {{ d.get('zz', 5) }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }} {{ xs.index(2) }} {{ xs.count(1) }}",
     "1 None 5 ['a', 'b', 'c'] [1, [1, 2], None] [('a', 1), ('b', [1, 2]), ('c', None)] 1 1", false},
    {"{{ range(3)|list }} {{ range(1, 10, 3)|list }} {{ range(5, 0, -2)|list }} {{ dict(a=1, b=2) }} {{ namespace(x=1).x }}",
     "[0, 1, 2] [1, 4, 7] [5, 3, 1] {'a': 1, 'b': 2} 1", false},
    {"{{ xs[1:]|tojson }} {{ 'abc'.upper().lower() }} {{ msgs[0]['role'] }} {{ msgs|selectattr('role', 'eq', 'assistant')|list|length }}",
     "[2, 3] abc user 1", false},
    {"{%- set x = 'a\n' -%}\n{{ x }}|{{ x|trim }}",
     "a\n|a", false},
    {"{{ '\\u2028'|length }} {{ 'a\\u00a0b'.split() }} {{ ' \\u3000x'.strip() }}",
     "1 ['a', 'b'] x", false},
    {"{% for m in msgs %}{{ m.role|upper }}:{{ m.content }}{% if not loop.last %}\n{% endif %}{% endfor %}",
     "USER:hiASSISTANT:yo", false},
    {"{{ 10 ** 20 if false else 10 ** 18 }} {{ 2 ** 0.5 }} {{ 2 ** -2 }} {{ 4 ** 0.5 }}",
     "1000000000000000000 1.4142135623730951 0.25 2.0", false},
    {"{{ 'x' is string and 'y' }} {{ not t is none }}",
     "y True", false},
    {"[{{ d[[1]] }}][{{ d[u] }}][{{ xs['a'] }}][{{ none.x }}][{{ s.nosuch }}]",
     "[][][][][]", false},
    {"{{ u }}|{{ u|length }}|{{ u|list }}|{% for x in u %}x{% else %}empty{% endfor %}|{{ u == none }}|{{ u ~ 'a' }}|{{ u is defined }}",
     "|0|[]|empty|False|a|False", false},
};

const Case kErrors[] = {
    {"{{ u.x }}", nullptr, true},  // Python: "UndefinedError: 'u' is undefined"
    {"{{ u['x'] }}", nullptr, true},  // Python: "UndefinedError: 'u' is undefined"
    {"{{ 1 + 'a' }}", nullptr, true},  // Python: "TypeError: unsupported operand type(s) for +: 'int' and 'str'"
    {"{{ xs.append(4) }}", nullptr, true},  // Python: "SecurityError: access to attribute 'append' of 'list' object is unsafe."
    {"{{ d.update({}) }}", nullptr, true},  // Python: "SecurityError: access to attribute 'update' of 'dict' object is unsafe."
    {"{{ u() }}", nullptr, true},  // Python: "UndefinedError: 'u' is undefined"
    {"{{ 1 / 0 }}", nullptr, true},  // Python: 'ZeroDivisionError: division by zero'
    {"{{ 5 % 0 }}", nullptr, true},  // Python: 'ZeroDivisionError: integer modulo by zero'
    {"{% set v = 1 %}{% set v.a = 1 %}", nullptr, true},  // Python: 'TemplateRuntimeError: cannot assign attribute on non-namespace object'
    {"{{ range(200000)|length }}", nullptr, true},  // Python: 'OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).'
    {"{{ u|tojson }}", nullptr, true},  // Python: 'TypeError: Object of type Undefined is not JSON serializable'
    {"{{ namespace()|tojson }}", nullptr, true},  // Python: 'TypeError: Object of type Namespace is not JSON serializable'
    {"{{ [1] < 'a' }}", nullptr, true},  // Python: "TypeError: '<' not supported between instances of 'list' and 'str'"
    {"{% for a, b in xs %}{% endfor %}", nullptr, true},  // Python: 'TypeError: cannot unpack non-iterable int object'
    {"{{ 'a' in 1 }}", nullptr, true},  // Python: "TypeError: argument of type 'int' is not iterable"
    {"{{ 1 in 'abc' }}", nullptr, true},  // Python: "TypeError: 'in <string>' requires string as left operand, not int"
    {"{{ xs|nosuchfilter }}", nullptr, true},  // Python: "TemplateAssertionError: No filter named 'nosuchfilter'."
    {"{{ 1 is nosuchtest }}", nullptr, true},  // Python: "TemplateAssertionError: No test named 'nosuchtest'."
    {"{{ 'x'[::0] }}", nullptr, true},  // Python: 'ValueError: slice step cannot be zero'
    {"{{ -u }}", nullptr, true},  // Python: "UndefinedError: 'u' is undefined"
    {"{{ u + 1 }}", nullptr, true},  // Python: "UndefinedError: 'u' is undefined"
    {"{{ u < 1 }}", nullptr, true},  // Python: "UndefinedError: 'u' is undefined"
    {"{{ 'a' * 'b' }}", nullptr, true},  // Python: "TypeError: can't multiply sequence by non-int of type 'str'"
    {"{{ none.x.y }}", nullptr, true},  // Python: "UndefinedError: 'None' has no attribute 'x'"
    {"{{ -xs|length }}", nullptr, true},  // Python: "TypeError: bad operand type for unary -: 'list'"
    {"{% macro m() %}{{ u.v }}{% endmacro %}{{ m() }}", nullptr, true},  // Python: "UndefinedError: 'u' is undefined"
    {"{{ {}.pop('a') }}", nullptr, true},  // Python: "SecurityError: access to attribute 'pop' of 'dict' object is unsafe."
};

void check(const Case* cases, size_t n) {
  const nlohmann::ordered_json vars = nlohmann::ordered_json::parse(kVars);
  for (size_t i = 0; i < n; ++i) {
    const Case& c = cases[i];
    SCOPED_TRACE(c.src);
    if (c.is_error) {
      EXPECT_THROW(ChatTemplate::parse(c.src).render(vars), Error);
      continue;
    }
    try {
      EXPECT_EQ(ChatTemplate::parse(c.src).render(vars), c.expected);
    } catch (const Error& e) {
      ADD_FAILURE() << "threw " << e.what();
    }
  }
}

TEST(JinjaPython, WhitespaceControl) { check(kWhitespace, std::size(kWhitespace)); }
TEST(JinjaPython, Expressions) { check(kExpressions, std::size(kExpressions)); }
TEST(JinjaPython, Statements) { check(kStatements, std::size(kStatements)); }
TEST(JinjaPython, Filters) { check(kFilters, std::size(kFilters)); }
TEST(JinjaPython, Tests) { check(kTests, std::size(kTests)); }
TEST(JinjaPython, MethodsAndUndefined) { check(kMethods, std::size(kMethods)); }
TEST(JinjaPython, ErrorsWherePythonRaises) { check(kErrors, std::size(kErrors)); }

// Python integers are unbounded; tern's are int64 and say so instead of wrapping.
TEST(JinjaSemantics, IntegerOverflowIsAnError) {
  EXPECT_EQ(ChatTemplate::parse("{{ 9223372036854775806 + 1 }}").render(nlohmann::ordered_json::object()),
            "9223372036854775807");
  EXPECT_THROW(ChatTemplate::parse("{{ 9223372036854775807 + 1 }}").render(nlohmann::ordered_json::object()), Error);
  EXPECT_THROW(ChatTemplate::parse("{{ 2 ** 64 }}").render(nlohmann::ordered_json::object()), Error);
}

// Python's '%d' % 1e41 prints a 42-digit integer; tern refuses floats outside int64 (found by the fuzzer).
TEST(JinjaSemantics, IntegerFormatOfHugeFloatIsAnError) {
  EXPECT_EQ(ChatTemplate::parse("{{ '%d'|format(-3.9) }}").render(nlohmann::ordered_json::object()), "-3");
  EXPECT_THROW(ChatTemplate::parse("{{ '%d'|format(1e41) }}").render(nlohmann::ordered_json::object()), Error);
  EXPECT_THROW(ChatTemplate::parse("{{ '%x' % (0.0 - 1e300) }}").render(nlohmann::ordered_json::object()), Error);
}

TEST(JinjaSemantics, RaiseExceptionInsideMacroAndLoop) {
  ChatTemplate t = ChatTemplate::parse(
      "{% macro check(m) %}{% if m.role not in ['user', 'assistant'] %}"
      "{{ raise_exception('bad role: ' ~ m.role) }}{% endif %}{% endmacro %}"
      "{% for m in messages %}{{ check(m) }}{{ m.role }};{% endfor %}");
  nlohmann::ordered_json ok = nlohmann::ordered_json::parse(R"({"messages": [{"role": "user"}, {"role": "assistant"}]})");
  EXPECT_EQ(t.render(ok), "user;assistant;");
  nlohmann::ordered_json bad = nlohmann::ordered_json::parse(R"({"messages": [{"role": "user"}, {"role": "tool"}]})");
  try {
    t.render(bad);
    FAIL() << "expected raise_exception";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "bad role: tool");
  }
}

TEST(JinjaSemantics, RenderIsRepeatableAndIndependent) {
  ChatTemplate t = ChatTemplate::parse("{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}");
  nlohmann::ordered_json vars = nlohmann::ordered_json::parse(R"({"messages": [1, 2, 3]})");
  EXPECT_EQ(t.render(vars), "3");
  EXPECT_EQ(t.render(vars), "3");
}

}  // namespace
}  // namespace tern::text
