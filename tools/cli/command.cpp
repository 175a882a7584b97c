// Argument parsing and help text for CLI commands.
#include "tools/cli/command.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "tern/base/error.h"

namespace tern::cli {

std::vector<Command>& commands() {
  static std::vector<Command> c;
  return c;
}

Args& Args::flag(const std::string& name, const std::string& value_name, const std::string& help,
                 const std::string& default_value) {
  flags_.push_back({name, value_name, help, default_value});
  return *this;
}

Args& Args::positional(const std::string& name, const std::string& help, bool required) {
  positionals_.push_back({name, help, required});
  return *this;
}

bool Args::parse(int argc, char** argv) {
  size_t pos = 0;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(help_text().c_str(), stdout);
      return false;
    }
    if (a.size() > 2 && a.rfind("--", 0) == 0) {
      std::string name = a.substr(2), value;
      bool inline_value = false;
      if (auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        inline_value = true;
      }
      const Flag* f = nullptr;
      for (const auto& fl : flags_)
        if (fl.name == name) f = &fl;
      TERN_CHECK(f, "[{}] unknown option --{} (see tern {} --help)", command_, name, command_);
      if (f->value_name.empty()) {
        TERN_CHECK(!inline_value, "[{}] option --{} takes no value", command_, name);
        values_[name] = "1";
      } else {
        if (!inline_value) {
          TERN_CHECK(i + 1 < argc, "[{}] option --{} expects a value {}", command_, name, f->value_name);
          value = argv[++i];
        }
        values_[name] = value;
      }
      continue;
    }
    TERN_CHECK(pos < positionals_.size(), "[{}] unexpected argument '{}' (see tern {} --help)", command_, a, command_);
    values_[positionals_[pos++].name] = a;
  }
  for (size_t p = pos; p < positionals_.size(); ++p)
    TERN_CHECK(!positionals_[p].required, "[{}] missing argument {} (see tern {} --help)", command_,
               positionals_[p].name, command_);
  return true;
}

bool Args::has(const std::string& name) const { return values_.count(name) > 0; }

std::optional<std::string> Args::opt(const std::string& name) const {
  if (auto it = values_.find(name); it != values_.end()) return it->second;
  for (const auto& f : flags_)
    if (f.name == name && !f.default_value.empty()) return f.default_value;
  return std::nullopt;
}

std::string Args::get(const std::string& name) const { return opt(name).value_or(""); }

int64_t Args::get_int(const std::string& name) const {
  std::string v = get(name);
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(v.c_str(), &end, 10);
  TERN_CHECK(!v.empty() && end && *end == 0 && errno == 0, "[{}] expected an integer for --{}, got '{}'", command_,
             name, v);
  return x;
}

int64_t Args::get_int(const std::string& name, int64_t lo, int64_t hi) const {
  const int64_t x = get_int(name);
  TERN_CHECK(x >= lo && x <= hi, "[{}] expected --{} in [{}, {}], got {}", command_, name, lo, hi, x);
  return x;
}

float Args::get_float(const std::string& name) const {
  const double x = get_double(name);
  TERN_CHECK(std::isfinite(x) && std::fabs(x) <= std::numeric_limits<float>::max(),
             "[{}] expected a finite number within float range for --{}, got '{}'", command_, name, get(name));
  return static_cast<float>(x);
}

double Args::get_double(const std::string& name) const {
  std::string v = get(name);
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  TERN_CHECK(!v.empty() && end && *end == 0, "[{}] expected a number for --{}, got '{}'", command_, name, v);
  return x;
}

std::string Args::help_text() const {
  std::string out = "usage: tern " + command_;
  for (const auto& p : positionals_) out += p.required ? " " + p.name : " [" + p.name + "]";
  out += " [options]\n\n" + summary_ + "\n";
  if (!positionals_.empty()) {
    out += "\narguments:\n";
    for (const auto& p : positionals_) out += fmt::format("  {:<26} {}\n", p.name, p.help);
  }
  out += "\noptions:\n";
  for (const auto& f : flags_) {
    std::string lhs = "--" + f.name + (f.value_name.empty() ? "" : " " + f.value_name);
    std::string help = f.help;
    if (!f.default_value.empty()) help += " (default " + f.default_value + ")";
    out += fmt::format("  {:<26} {}\n", lhs, help);
  }
  out += fmt::format("  {:<26} {}\n", "--help", "show this help");
  return out;
}

std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  size_t i = 0;
  TERN_CHECK(!s.empty(), "[ids] expected comma-separated token ids, got an empty string");
  while (i <= s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    std::string tok = s.substr(i, j - i);
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(tok.c_str(), &end, 10);
    TERN_CHECK(!tok.empty() && *end == 0 && errno == 0 && v >= 0 && v <= INT32_MAX,
               "[ids] expected a non-negative integer token id, got '{}'", tok);
    ids.push_back(static_cast<int32_t>(v));
    i = j + 1;
  }
  return ids;
}

}  // namespace tern::cli
