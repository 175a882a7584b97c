// config.json parsing: required keys, v4/v5 rope spellings, nested text_config, per-type defaults.
#include "tern/io/model_config.h"

#include <cmath>
#include <filesystem>
#include <limits>

#include "tern/base/file.h"
#include "tern/io/json_util.h"

namespace tern::io {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kRopeTypes[] = {"default", "linear", "llama3", "yarn", "proportional"};

// transformers' per-model default for tie_word_embeddings when config.json omits it.
bool default_tie(const std::string& model_type) { return model_type.rfind("gemma", 0) == 0; }

int32_t token_id(const json& j, const std::string& path, const std::string& key) {
  TERN_CHECK(j.is_number_integer() && j.get<int64_t>() >= std::numeric_limits<int32_t>::min() &&
                 j.get<int64_t>() <= std::numeric_limits<int32_t>::max(),
             "[config] {}: expected key '{}' to be a token id, got {}", path, key, json_brief(j));
  return j.get<int32_t>();
}

// The rope of one parameter object. params holds the rope keys (a v5 rope_parameters entry or a v4
// rope_scaling object, possibly null); outer supplies v4 rope_theta / partial_rotary_factor.
ops::RopeConfig parse_rope(const json& params, const json& outer, const ModelConfig& c, const std::string& path,
                           const std::string& where) {
  static const json kEmpty = json::object();
  const JsonReader p(params.is_object() ? params : kEmpty, path, where + ".");
  const JsonReader o(outer, path, "");
  ops::RopeConfig r;
  std::string type = "default";
  if (auto t = p.opt_string("rope_type")) {
    type = *t;
  } else if (auto t2 = p.opt_string("type")) {
    type = *t2;
  }
  TERN_CHECK(is_known_rope_type(type),
             "[config] {}: expected {}rope type one of default, linear, llama3, yarn, proportional, got '{}'", path,
             where.empty() ? "" : where + " ", type);
  r.type = type;
  r.theta = p.opt_double("rope_theta").value_or(o.opt_double("rope_theta").value_or(10000.0));
  r.factor = p.opt_double("factor").value_or(1.0);
  r.low_freq_factor = p.opt_double("low_freq_factor").value_or(r.low_freq_factor);
  r.high_freq_factor = p.opt_double("high_freq_factor").value_or(r.high_freq_factor);
  r.original_max_position = p.opt_int("original_max_position_embeddings").value_or(c.max_position_embeddings);
  r.beta_fast = p.opt_double("beta_fast").value_or(r.beta_fast);
  r.beta_slow = p.opt_double("beta_slow").value_or(r.beta_slow);
  r.attention_factor = p.opt_double("attention_factor").value_or(0.0);
  r.mscale = p.opt_double("mscale").value_or(0.0);
  r.mscale_all_dim = p.opt_double("mscale_all_dim").value_or(0.0);
  r.truncate = p.opt_bool("truncate").value_or(true);
  TERN_CHECK(r.theta > 0, "[config] {}: expected rope_theta > 0, got {}", path, r.theta);
  TERN_CHECK(r.factor > 0, "[config] {}: expected rope factor > 0, got {}", path, r.factor);
  if (type == "llama3") {
    TERN_CHECK(p.has("original_max_position_embeddings"),
               "[config] {}: expected key 'original_max_position_embeddings' for llama3 rope", path);
  }
  double partial = p.opt_double("partial_rotary_factor").value_or(o.opt_double("partial_rotary_factor").value_or(1.0));
  TERN_CHECK(partial > 0 && partial <= 1, "[config] {}: expected partial_rotary_factor in (0, 1], got {}", path,
             partial);
  r.head_dim = c.head_dim;
  r.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * partial) / 2 * 2;
  TERN_CHECK(r.rotary_dim > 0, "[config] {}: expected a rotary dim > 0 (head_dim {} * partial_rotary_factor {}), got {}",
             path, c.head_dim, partial, r.rotary_dim);
  return r;
}

void parse_ropes(const JsonReader& t, ModelConfig& c) {
  const std::string& path = c.path;
  const json* rp = t.find("rope_parameters");
  if (rp && !rp->is_null()) {
    TERN_CHECK(rp->is_object(), "[config] {}: expected key 'rope_parameters' to be an object, got {}", path,
               json_brief(*rp));
    bool per_type = !rp->empty();
    for (const auto& [k, v] : rp->items()) per_type = per_type && v.is_object();
    if (per_type) {
      for (const auto& [k, v] : rp->items()) {
        c.rope_by_layer_type[k] = parse_rope(v, t.object(), c, path, "rope_parameters." + k);
      }
      auto full = c.rope_by_layer_type.find("full_attention");
      c.rope = full != c.rope_by_layer_type.end() ? full->second : c.rope_by_layer_type.begin()->second;
      return;
    }
    c.rope = parse_rope(*rp, t.object(), c, path, "rope_parameters");
    return;
  }
  const json* rs = t.find("rope_scaling");
  if (rs && !rs->is_null()) {
    TERN_CHECK(rs->is_object(), "[config] {}: expected key 'rope_scaling' to be an object or null, got {}", path,
               json_brief(*rs));
  }
  static const json kNull;
  c.rope = parse_rope(rs ? *rs : kNull, t.object(), c, path, "rope_scaling");
}

std::string read_text(const std::string& path) { return read_file(path, "config"); }

}  // namespace

bool is_known_rope_type(const std::string& type) {
  for (const char* t : kRopeTypes) {
    if (type == t) return true;
  }
  return false;
}

const ops::RopeConfig& ModelConfig::rope_for(const std::string& layer_type) const {
  auto it = rope_by_layer_type.find(layer_type);
  return it != rope_by_layer_type.end() ? it->second : rope;
}

ModelConfig parse_model_config(const json& config, const std::string& path) {
  TERN_CHECK(config.is_object(), "[config] {}: expected a JSON object, got {}", path, config.type_name());
  ModelConfig c;
  c.path = path;
  const JsonReader outer(config, path, "");
  if (auto a = outer.find("architectures"); a && !a->is_null()) {
    TERN_CHECK(a->is_array() && (a->empty() || (*a)[0].is_string()),
               "[config] {}: expected key 'architectures' to be a list of strings, got {}", path, json_brief(*a));
    if (!a->empty()) c.architecture = (*a)[0].get<std::string>();
  }
  c.model_type = outer.opt_string("model_type").value_or("");

  const json* nested = outer.find("text_config");
  if (nested && !nested->is_null()) {
    TERN_CHECK(nested->is_object(), "[config] {}: expected key 'text_config' to be an object, got {}", path,
               json_brief(*nested));
  } else {
    nested = nullptr;
  }
  c.text = nested ? *nested : config;
  const JsonReader t(c.text, path, nested ? "text_config." : "");
  c.text_model_type = nested ? t.opt_string("model_type").value_or(c.model_type) : c.model_type;

  c.vocab_size = t.req_int("vocab_size");
  c.hidden_size = t.req_int("hidden_size");
  c.n_layer = t.req_int("num_hidden_layers");
  c.n_head = t.req_int("num_attention_heads");
  for (auto [name, v] : {std::pair{"vocab_size", c.vocab_size}, std::pair{"hidden_size", c.hidden_size},
                         std::pair{"num_hidden_layers", c.n_layer}, std::pair{"num_attention_heads", c.n_head}}) {
    TERN_CHECK(v > 0, "[config] {}: expected key '{}{}' > 0, got {}", path, t.prefix(), name, v);
  }
  c.intermediate_size = t.opt_int("intermediate_size").value_or(0);
  c.n_head_kv = t.opt_int("num_key_value_heads").value_or(c.n_head);
  TERN_CHECK(c.n_head_kv > 0 && c.n_head % c.n_head_kv == 0,
             "[config] {}: expected num_key_value_heads to divide num_attention_heads {}, got {}", path, c.n_head,
             c.n_head_kv);
  c.head_dim = t.opt_int("head_dim").value_or(c.hidden_size / c.n_head);
  TERN_CHECK(c.head_dim > 0, "[config] {}: expected head_dim > 0, got {}", path, c.head_dim);
  c.rms_norm_eps = t.opt_double("rms_norm_eps").value_or(1e-6);
  TERN_CHECK(std::isfinite(c.rms_norm_eps) && c.rms_norm_eps >= 0, "[config] {}: expected rms_norm_eps >= 0, got {}",
             path, c.rms_norm_eps);
  c.attention_bias = t.opt_bool("attention_bias").value_or(false);
  c.mlp_bias = t.opt_bool("mlp_bias").value_or(false);
  c.hidden_act = t.opt_string("hidden_act").value_or(t.opt_string("hidden_activation").value_or("silu"));
  c.max_position_embeddings = t.opt_int("max_position_embeddings").value_or(0);
  c.tie_word_embeddings = t.opt_bool("tie_word_embeddings")
                              .value_or(outer.opt_bool("tie_word_embeddings").value_or(default_tie(c.text_model_type)));

  c.sliding_window = t.opt_int("sliding_window").value_or(0);
  if (!t.opt_bool("use_sliding_window").value_or(true)) c.sliding_window = 0;
  TERN_CHECK(c.sliding_window >= 0, "[config] {}: expected sliding_window >= 0, got {}", path, c.sliding_window);

  if (auto lt = t.find("layer_types"); lt && !lt->is_null()) {
    TERN_CHECK(lt->is_array(), "[config] {}: expected key 'layer_types' to be a list, got {}", path, json_brief(*lt));
    for (const json& s : *lt) {
      TERN_CHECK(s.is_string(), "[config] {}: expected layer_types entries to be strings, got {}", path, json_brief(s));
      c.layer_types.push_back(s.get<std::string>());
    }
    TERN_CHECK(static_cast<int64_t>(c.layer_types.size()) == c.n_layer,
               "[config] {}: expected {} layer_types (num_hidden_layers), got {}", path, c.n_layer,
               c.layer_types.size());
  } else {
    c.layer_types.assign(static_cast<size_t>(c.n_layer), "full_attention");
  }

  // Token ids live in the text config, or in the outer object of a multimodal checkpoint.
  auto ids_from = [&](const char* key) -> const json* {
    const json* j = t.find(key);
    if ((!j || j->is_null()) && nested) j = outer.find(key);
    return j && !j->is_null() ? j : nullptr;
  };
  if (const json* j = ids_from("bos_token_id")) c.bos_token_id = token_id(*j, path, "bos_token_id");
  if (const json* j = ids_from("pad_token_id")) c.pad_token_id = token_id(*j, path, "pad_token_id");
  if (const json* j = ids_from("eos_token_id")) c.eos_token_ids = token_ids(*j, path, "eos_token_id");

  parse_ropes(t, c);
  return c;
}

ModelConfig load_model_config(const std::string& model_dir) {
  std::error_code ec;
  TERN_CHECK(fs::is_directory(model_dir, ec), "[config] {}: expected a model directory, got {}", model_dir,
             fs::exists(model_dir, ec) ? "a file" : "nothing at that path");
  const std::string path = (fs::path(model_dir) / "config.json").string();
  TERN_CHECK(fs::is_regular_file(path, ec), "[config] {}: expected a config.json file, got none", path);
  return parse_model_config(parse_json_text(read_text(path), path, "config"), path);
}

}  // namespace tern::io
