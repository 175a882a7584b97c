// Tokenizer benchmark (not part of the build): cold load time of a tokenizer directory and
// single-thread encode throughput over text files, line by line and as one string (CPU time).
// usage: tokenizer_bench MODEL_DIR FILE...
#include <algorithm>
#include <ctime>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tern/text/tokenizer.h"

namespace {

// Thread CPU time: on a shared machine wall time mostly measures the other processes.
double now_s() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

std::string slurp(const char* path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: tokenizer_bench MODEL_DIR FILE...\n");
    return 2;
  }
  double t0 = now_s();
  tern::text::Tokenizer tok = tern::text::Tokenizer::load(argv[1]);
  double cold = now_s() - t0;
  std::vector<double> loads;
  for (int r = 0; r < 3; ++r) {
    double t = now_s();
    tern::text::Tokenizer again = tern::text::Tokenizer::load(argv[1]);
    loads.push_back(now_s() - t);
  }
  std::sort(loads.begin(), loads.end());
  std::printf("load: first %.1f ms, median of 3 more %.1f ms\n", cold * 1e3, loads[1] * 1e3);
  for (int f = 2; f < argc; ++f) {
    std::string text = slurp(argv[f]);
    std::vector<std::string> lines;
    std::istringstream ls(text);
    for (std::string l; std::getline(ls, l);) lines.push_back(l + "\n");
    tern::text::Tokenizer fresh = tern::text::Tokenizer::load(argv[1]);  // empty word cache
    double t = now_s();
    size_t n_ids = 0;
    for (const std::string& l : lines) n_ids += fresh.encode(l).size();
    double lines_s = now_s() - t;
    t = now_s();
    size_t n_whole = tok.encode(text).size();
    double whole_s = now_s() - t;
    double mb = text.size() / 1e6;
    std::printf("%s: %.1f MB, %zu tokens; per line %.1f MB/s (%.2f s), one string %.1f MB/s (%zu tokens)\n", argv[f],
                mb, n_ids, mb / lines_s, lines_s, mb / whole_s, n_whole);
  }
  return 0;
}
