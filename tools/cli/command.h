// The CLI's command registry and argument parser: each cmd_*.cpp registers one subcommand with
// TERN_COMMAND; Args declares its flags (name, value name, help) so `tern CMD --help` is generated.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tern::cli {

// Declared flags and positionals of one command, then the parsed values.
class Args {
 public:
  Args(std::string command, std::string summary) : command_(std::move(command)), summary_(std::move(summary)) {}

  // --name VALUE (value_name non-empty) or a boolean --name (value_name empty).
  Args& flag(const std::string& name, const std::string& value_name, const std::string& help,
             const std::string& default_value = "");
  Args& positional(const std::string& name, const std::string& help, bool required = true);

  // Parses argv (after the command name). Throws tern::Error on unknown flags or missing values.
  // Returns false when --help was asked for (the help text is printed to stdout).
  bool parse(int argc, char** argv);

  bool has(const std::string& name) const;  // given on the command line (or a boolean set)
  std::string get(const std::string& name) const;  // value or default; "" if neither
  std::optional<std::string> opt(const std::string& name) const;
  int64_t get_int(const std::string& name) const;
  // The integer of --name, which must lie in [lo, hi] ("[command] expected --name in [lo, hi], got x").
  int64_t get_int(const std::string& name, int64_t lo, int64_t hi) const;
  double get_double(const std::string& name) const;
  // The number of --name as a float: finite and within float range.
  float get_float(const std::string& name) const;
  std::string help_text() const;
  const std::string& summary() const { return summary_; }

 private:
  struct Flag {
    std::string name, value_name, help, default_value;
  };
  struct Pos {
    std::string name, help;
    bool required;
  };
  std::string command_, summary_;
  std::vector<Flag> flags_;
  std::vector<Pos> positionals_;
  std::map<std::string, std::string> values_;
};

struct Command {
  std::string name;
  std::string summary;
  std::function<int(int argc, char** argv)> run;
};

std::vector<Command>& commands();

struct Registrar {
  Registrar(const char* name, const char* summary, std::function<int(int, char**)> run) {
    commands().push_back({name, summary, std::move(run)});
  }
};

// Parses a comma-separated list of token ids ("1,2,3"); throws on anything else.
std::vector<int32_t> parse_ids(const std::string& s);

}  // namespace tern::cli

#define TERN_CLI_CONCAT2(a, b) a##b
#define TERN_CLI_CONCAT(a, b) TERN_CLI_CONCAT2(a, b)
// Registers a subcommand: TERN_COMMAND("name", "one-line summary", function taking (argc, argv)).
#define TERN_COMMAND(name, summary, fn) \
  static ::tern::cli::Registrar TERN_CLI_CONCAT(tern_cmd_registrar_, __LINE__)(name, summary, fn)
