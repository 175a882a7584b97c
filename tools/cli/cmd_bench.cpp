// tern bench: prefill and decode throughput of a model (warm-up, repeats, median).
#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <limits>
#include <random>

#include <nlohmann/json.hpp>

#include "tern/base/parallel.h"
#include "tern/base/timer.h"
#include "tern/engine/compiled_decode.h"
#include "tern/engine/prefill.h"
#include "tern/layers/router_tape.h"
#include "tern/ops/graph.h"
#include "tern/ops/device.h"
#include "tern/ops/reduce.h"
#include "tern/sample/device_sampler.h"
#include "tools/cli/model_args.h"

namespace tern::cli {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

Tensor random_ids(int64_t rows, int64_t n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Tensor t = Tensor::empty({rows, n}, Dtype::i32);
  for (int64_t i = 0; i < rows * n; ++i) t.data<int32_t>()[i] = static_cast<int32_t>(rng() % vocab);
  return t;
}

std::vector<int32_t> to_ids(const Tensor& argmax) {
  Tensor h = argmax.to(Device::cpu()).contiguous();
  return std::vector<int32_t>(h.data<int32_t>(), h.data<int32_t>() + h.numel());
}

int run_bench(int argc, char** argv) {
  Args a("bench", "Measure prefill and decode tokens/s (random prompt tokens; greedy decode unless --temperature).");
  a.positional("MODEL_DIR", "a Hugging Face model directory")
      .flag("prompt-tokens", "N", "prefill length; decode runs after a prompt of this length", "512")
      .flag("gen-tokens", "N", "decode steps per repeat", "128")
      .flag("repeats", "N", "timed repeats (the median is reported)", "5")
      .flag("warmup", "N", "untimed warm-up repeats", "1")
      .flag("batch", "N", "sequences decoded side by side (decode tok/s counts all of them)", "1")
      .flag("prefill-chunk", "N", "at most N tokens (rows x positions) a prefill forward, bounding its memory; "
            "0 = the whole batch in one forward", std::to_string(kDefaultPrefillTokens))
      .flag("cuda-graphs", "on|off", "CUDA: capture the decode step as a graph and replay it (compiled decode)", "on")
      .flag("temperature", "T", "decode by sampling as generate does instead of greedy; 0 = greedy", "0")
      .flag("top-k", "K", "with --temperature: sample among the K most likely tokens (0 = off)", "0")
      .flag("top-p", "P", "with --temperature: nucleus sampling mass in (0, 1]", "1")
      .flag("min-p", "P", "with --temperature: drop tokens below P times the most likely one's probability", "0")
      .flag("seed", "N", "with --temperature: the samplers' seed (row r uses N + r)", "0")
      .flag("sampler", "device|host", "with --temperature: device = as generate samples (the device's top-K "
            "candidates, the whole row copied only when they cannot decide); host = every row copied to the host "
            "and sampled there (the same tokens)", "device")
      .flag("json", "", "print JSON instead of text (decode_steady_tokens_per_second: compiled decode without its "
            "first, eager step and its graph captures, which decode_setup_ms holds)");
  add_runtime_flags(a);
  add_kv_cache_flags(a);
  if (!a.parse(argc, argv)) return 0;
  const int64_t P = a.get_int("prompt-tokens"), G = a.get_int("gen-tokens");
  const int64_t reps = a.get_int("repeats"), warm = a.get_int("warmup"), B = a.get_int("batch");
  TERN_CHECK(P >= 1 && G >= 1 && reps >= 1 && warm >= 0 && B >= 1,
             "[bench] expected --prompt-tokens, --gen-tokens, --repeats, --batch >= 1 and --warmup >= 0");
  const std::string graphs = a.get("cuda-graphs");
  TERN_CHECK(graphs == "on" || graphs == "off", "[bench] expected --cuda-graphs on or off, got '{}'", graphs);
  const int64_t chunk = a.get_int("prefill-chunk");
  TERN_CHECK(chunk >= 0, "[bench] expected --prefill-chunk >= 0, got {}", chunk);
  const KVCacheOptions kv = kv_cache_options(a);
  LoadOptions opt = runtime_options(a, kv);
  Timer load_timer;
  LoadedModel m = load_for_cli(a.get("MODEL_DIR"), opt);
  const double load_seconds = load_timer.seconds();
  warn_unquantized_kv(m, "bench", kv);
  const Model& model = *m.model;
  const int64_t vocab = model.vocab_size();
  SamplingParams sampling;
  sampling.temperature = a.get_float("temperature");
  sampling.top_k = static_cast<int32_t>(a.get_int("top-k", 0, std::numeric_limits<int32_t>::max()));
  sampling.top_p = a.get_float("top-p");
  sampling.min_p = a.get_float("min-p");
  validate(sampling, vocab);
  const bool sampled = sampling.temperature > 0.0f;
  const std::string sampler_kind = a.get("sampler");
  TERN_CHECK(sampler_kind == "device" || sampler_kind == "host", "[bench] expected --sampler device or host, got '{}'",
             sampler_kind);
  const bool host_sampler = sampler_kind == "host";
  int64_t full_row_copies = 0, sampled_rows = 0;

  // decode: whole decode phases. steady: the same without the compiled decoder's one-time steps (its first
  // step, run eagerly, and each step that captured a graph for a new span bucket); setup_ms: those steps.
  std::vector<double> prefill_rate, decode, steady, setup_ms;
  const char* in_order = std::getenv("TERN_BENCH_IN_ORDER");
  const bool ahead = !(in_order && std::string(in_order) == "1");
  bool compiled_used = false;
  CacheList caches;  // the last repeat's, for the recorded step below
  std::vector<int32_t> next;
  for (int64_t r = 0; r < warm + reps; ++r) {
    caches = model.make_caches(kv);
    Tensor ids = random_ids(B, P, vocab, 1234 + r);
    Timer t;
    Tensor logits = prefill(model, ids, caches, chunk);  // [B, 1, V] on the CPU: prefill ends with a sync
    double tp = t.seconds();
    t.reset();
    // Each step's ids reach the host before the next step, as in generation: the device argmax, or
    // (--temperature) each row sampled as generate samples (--sampler device) or from a host copy of
    // the rows (--sampler host).
    std::vector<DeviceSampler> samplers;
    for (int64_t b = 0; sampled && b < B; ++b) {
      SamplingParams p = sampling;
      p.seed = static_cast<uint64_t>(a.get_int("seed", 0, std::numeric_limits<int64_t>::max())) + static_cast<uint64_t>(b);
      samplers.emplace_back(p);
    }
    auto pick = [&](const Tensor& l) {
      if (!sampled) return to_ids(ops::argmax(l.view({B, vocab}), -1));
      Tensor rows = l.reshape({B, vocab});
      if (host_sampler) rows = rows.to(Device::cpu());
      std::vector<int32_t> out(static_cast<size_t>(B));
      for (int64_t b = 0; b < B; ++b) out[b] = samplers[b].sample(rows.select(0, b)).token;
      return out;
    };
    next = pick(logits);
    double setup = 0.0;
    int64_t setup_steps = 0;
    if (graphs == "on" && CompiledDecoder::supported(model, caches)) {
      compiled_used = true;
      CompiledDecoder dec(model, caches, P + G + 1);
      dec.set_ids(next);
      for (int64_t g = 0; g < G; ++g) {
        // Each step's ids reach the host before the loop goes on. Greedy steps queue the next step before
        // reading this one's ids, as generate does (TERN_BENCH_IN_ORDER=1: step, read, step, ...).
        Timer st;
        const size_t graphs_before = dec.graphs();
        const int64_t steps_before = dec.steps();
        if (!sampled) {
          next = dec.greedy_step(g, ahead && g + 1 < G).ids;
        } else {
          dec.step();
          next = pick(dec.logits());
          dec.set_ids(next);
        }
        if (g == 0 || dec.graphs() != graphs_before) {
          setup += st.seconds();
          setup_steps += dec.steps() - steps_before;
        }
      }
    } else {
      for (int64_t g = 0; g < G; ++g) {
        Tensor step_ids = Tensor::empty({B, 1}, Dtype::i32);
        std::copy(next.begin(), next.end(), step_ids.data<int32_t>());
        logits = model.forward(step_ids, caches, false);
        next = pick(logits);
      }
    }
    device_synchronize();
    double td = t.seconds();
    for (const DeviceSampler& d : samplers) {
      full_row_copies += d.full_row_copies();
      sampled_rows += d.device_calls();
    }
    if (r >= warm) {
      prefill_rate.push_back(B * P / tp);
      decode.push_back(B * G / td);
      if (G > setup_steps) steady.push_back(B * (G - setup_steps) / (td - setup));
      setup_ms.push_back(setup * 1e3);
    }
  }
  // One more decode step, eager, with its routings recorded: for a model with routed experts, which of
  // them the batch's tokens chose in each layer -- the expert weights a decode step reads.
  RouterTape tape;
  if (describe_config(model.config()).value().experts.layers > 0) {
    Tensor step_ids = Tensor::empty({B, 1}, Dtype::i32);
    std::copy(next.begin(), next.end(), step_ids.data<int32_t>());
    tape.record([&] { model.forward(step_ids, caches, false); });
  }
  const RouterTape::Use use = tape.use();
  const std::string device = opt.device.is_cpu() ? fmt::format("cpu ({} threads)", num_threads()) : cuda_device_name();
  nlohmann::json out = {{"model", m.dir},
                        {"device", device},
                        {"load_seconds", load_seconds},
                        {"prompt_tokens", P},
                        {"gen_tokens", G},
                        {"repeats", reps},
                        {"kv_cache", kv.kind},
                        {"batch", B},
                        {"prefill_chunk_positions", prefill_positions(B, P, chunk)},
                        {"compiled_decode", compiled_used},
                        {"decode_sampling", sampled ? nlohmann::json{{"temperature", a.get_double("temperature")},
                                                                     {"top_k", sampling.top_k},
                                                                     {"top_p", a.get_double("top-p")},
                                                                     {"min_p", a.get_double("min-p")},
                                                                     {"sampler", sampler_kind},
                                                                     {"device_rows", sampled_rows},
                                                                     {"full_row_copies", full_row_copies}}
                                                    : nlohmann::json("greedy")},
                        {"prefill_tokens_per_second", median(prefill_rate)},
                        {"decode_tokens_per_second", median(decode)},
                        {"prefill_min", *std::min_element(prefill_rate.begin(), prefill_rate.end())},
                        {"prefill_max", *std::max_element(prefill_rate.begin(), prefill_rate.end())},
                        {"decode_min", *std::min_element(decode.begin(), decode.end())},
                        {"decode_max", *std::max_element(decode.begin(), decode.end())},
                        {"decode_setup_ms", median(setup_ms)},
                        {"decode_steady_tokens_per_second", steady.empty() ? nlohmann::json() : nlohmann::json(median(steady))}};
  if (use.routings > 0) {
    out["moe_decode_step"] = {{"layers", use.routings},
                              {"experts_chosen", use.experts},
                              {"experts", use.of_experts},
                              {"fewest_in_a_layer", use.fewest},
                              {"most_in_a_layer", use.most},
                              {"expert_bytes_read", use.bytes},
                              {"expert_bytes", use.of_bytes}};
  }
  if (a.has("json")) {
    std::puts(out.dump().c_str());
    return 0;
  }
  std::printf("model    %s on %s (loaded in %.2f s)\n", m.dir.c_str(), device.c_str(), load_seconds);
  const int64_t per_forward = prefill_positions(B, P, chunk);
  const std::string chunks = per_forward < P ? fmt::format(" in forwards of {} positions", per_forward) : "";
  std::printf("prefill  %lld tokens per row%s: %.1f tok/s (median of %lld; min %.1f, max %.1f)\n", (long long)P,
              chunks.c_str(), median(prefill_rate), (long long)reps, out["prefill_min"].get<double>(), out["prefill_max"].get<double>());
  const std::string how =
      sampled ? fmt::format(", sampled by the {} sampler (temperature {}, top-k {}, top-p {}, min-p {}; {} of {} device "
                            "rows copied whole)",
                            sampler_kind, a.get("temperature"), sampling.top_k, a.get("top-p"), a.get("min-p"),
                            full_row_copies, sampled_rows)
              : "";
  std::printf("decode   %lld tokens after a %lld-token prompt, batch %lld%s%s: %.1f tok/s (median of %lld; min %.1f, "
              "max %.1f)\n",
              (long long)G, (long long)P, (long long)B, how.c_str(), compiled_used ? ", compiled (CUDA graphs)" : "",
              median(decode), (long long)reps, out["decode_min"].get<double>(), out["decode_max"].get<double>());
  if (compiled_used && !steady.empty()) {
    std::printf("         without the first (eager) step and the graph captures (%.1f ms a run, median): %.1f tok/s\n",
                median(setup_ms), median(steady));
  }
  if (use.routings > 0) {
    const double layers = static_cast<double>(use.routings);
    const std::string tokens = B == 1 ? "one token" : fmt::format("{} tokens", B);
    std::printf("experts  a decode step's %s chose %.1f of %.0f experts a layer (%lld-%lld over %lld layers): %s of "
                "the experts' %s read a step\n",
                tokens.c_str(), use.experts / layers, use.of_experts / layers, (long long)use.fewest,
                (long long)use.most, (long long)use.routings, human_bytes(static_cast<double>(use.bytes)).c_str(),
                human_bytes(static_cast<double>(use.of_bytes)).c_str());
  }
  return 0;
}

}  // namespace
}  // namespace tern::cli

TERN_COMMAND("bench", "prefill and decode tokens/s", tern::cli::run_bench);
