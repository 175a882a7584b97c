// tern's entry point: dispatches to the registered subcommands; the one place errors become exit codes.
#include <cstdio>
#include <cstring>
#include <exception>

#include "tern/base/error.h"
#include "tools/cli/command.h"

namespace {

void print_usage() {
  std::printf("tern: run, score and benchmark open LLMs on CPU and GPU\n\nusage: tern COMMAND [args] [options]\n\ncommands:\n");
  for (const auto& c : tern::cli::commands()) std::printf("  %-10s %s\n", c.name.c_str(), c.summary.c_str());
  std::printf("\n`tern COMMAND --help` lists a command's options.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "help") || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    if (argc >= 3) {
      for (const auto& c : tern::cli::commands()) {
        if (c.name == argv[2]) {
          char help[] = "--help";
          char* args[] = {help};
          return c.run(1, args);
        }
      }
    }
    print_usage();
    return argc < 2 ? 2 : 0;
  }
  for (const auto& c : tern::cli::commands()) {
    if (c.name != argv[1]) continue;
    try {
      return c.run(argc - 2, argv + 2);
    } catch (const tern::Error& e) {
      std::fprintf(stderr, "tern %s: %s\n", argv[1], e.what());
      return 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tern %s: internal error: %s\n", argv[1], e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "tern: unknown command '%s' (see tern help)\n", argv[1]);
  return 2;
}
