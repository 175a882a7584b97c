// Tokenizer: loading the pipeline from tokenizer.json and running encode / decode through it.
#include "tern/text/tokenizer.h"

#include <filesystem>
#include <unordered_set>

#include "tern/base/error.h"
#include "tern/base/file.h"
#include "tern/text/added_tokens.h"
#include "tern/text/bpe.h"
#include "tern/text/decoders.h"
#include "tern/text/json_scan.h"
#include "tern/text/json_util.h"
#include "tern/text/normalizers.h"
#include "tern/text/post_processors.h"
#include "tern/text/pre_tokenizers.h"
#include "tern/text/unicode.h"

namespace tern::text {

struct Tokenizer::Impl {
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<Bpe> model;
  std::unique_ptr<PostProcessor> post_processor;
  std::unique_ptr<Decoder> decoder;
  AddedVocabulary added;
  StringMap<char> special_contents;
  int64_t vocab_size = 0;
  TokenizerConfig config;

  // Appends the ids of a text segment that holds no added token.
  void encode_segment(std::string_view s, bool at_origin, std::vector<int32_t>& ids) const {
    Pieces p;
    p.buf.assign(s);
    p.spans.push_back({0, p.buf.size(), at_origin});
    if (pre_tokenizer) pre_tokenizer->pre_tokenize(p);
    model->tokenize_all(p, ids);
  }
};

namespace {

std::vector<AddedToken> parse_added_tokens(const Json& j, const JsonPath& p) {
  std::vector<AddedToken> out;
  if (j.is_null()) return out;
  if (!j.is_array()) p.fail("an array", j);
  for (size_t i = 0; i < j.size(); ++i) {
    JsonPath at = p.at(i);
    const Json& e = j[i];
    AddedToken t;
    const Json& id = require(e, "id", at);
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
      (at / "id").fail("a non-negative integer", id);
    t.id = id.get<int32_t>();
    t.content = require_string(e, "content", at);
    t.special = get_bool(e, "special", at, false);
    t.lstrip = get_bool(e, "lstrip", at, false);
    t.rstrip = get_bool(e, "rstrip", at, false);
    t.single_word = get_bool(e, "single_word", at, false);
    t.normalized = get_bool(e, "normalized", at, !t.special);
    out.push_back(std::move(t));
  }
  return out;
}

std::shared_ptr<Tokenizer::Impl> build(const std::string& tokenizer_json, const std::string& tok_name,
                                       const std::string& config_json, const std::string& cfg_name) {
  JsonPath root{tok_name, ""};
  Json j;
  std::string_view raw_vocab, raw_merges;
  if (auto parts = split_tokenizer_json(tokenizer_json, root)) {
    j = std::move(parts->doc);
    raw_vocab = parts->vocab;
    raw_merges = parts->merges;
  } else {
    j = parse_json(tokenizer_json, tok_name);
  }
  if (!j.is_object()) root.fail("an object", j);
  auto impl = std::make_shared<Tokenizer::Impl>();
  auto field = [&](const char* key) -> const Json& {
    static const Json null_json;
    auto it = j.find(key);
    return it == j.end() ? null_json : *it;
  };
  impl->normalizer = make_normalizer(field("normalizer"), root / "normalizer");
  impl->pre_tokenizer = make_pre_tokenizer(field("pre_tokenizer"), root / "pre_tokenizer");
  impl->model = Bpe::from_json(require(j, "model", root), root / "model", raw_vocab, raw_merges);
  impl->post_processor = make_post_processor(field("post_processor"), root / "post_processor");
  impl->decoder = make_decoder(field("decoder"), root / "decoder");
  auto added = parse_added_tokens(field("added_tokens"), root / "added_tokens");
  impl->vocab_size = impl->model->size();
  for (const AddedToken& t : added) {
    impl->vocab_size = std::max<int64_t>(impl->vocab_size, int64_t{t.id} + 1);
    if (t.special) impl->special_contents.emplace(t.content, 1);
  }
  impl->added = AddedVocabulary(std::move(added), impl->normalizer.get());
  // The special tokens the post-processor adds (around an empty sequence) must be ids of the
  // vocabulary: encode() would hand a model ids outside its embedding otherwise.
  if (impl->post_processor) {
    for (int32_t id : impl->post_processor->process({})) {
      if (id < 0 || id >= impl->vocab_size) {
        (root / "post_processor")
            .fail(fmt::format("special-token ids inside the vocabulary [0, {})", impl->vocab_size),
                  fmt::format("id {}", id));
      }
    }
  }
  impl->config = TokenizerConfig::parse(config_json, cfg_name);
  return impl;
}

}  // namespace

Tokenizer Tokenizer::load(const std::string& model_dir) {
  namespace fs = std::filesystem;
  fs::path dir(model_dir);
  TERN_CHECK(fs::is_directory(dir), "[tokenizer] expected a model directory, got '{}'", model_dir);
  fs::path tok = dir / "tokenizer.json", cfg = dir / "tokenizer_config.json";
  TERN_CHECK(fs::exists(tok), "[tokenizer] expected {} (only tokenizer.json tokenizers are supported), got none",
             tok.string());
  std::string cfg_text = fs::exists(cfg) ? read_file(cfg.string(), "tokenizer") : "";
  auto impl = build(read_file(tok.string(), "tokenizer"), tok.string(), cfg_text, cfg.string());
  // transformers >= 4.43 saves templates beside the config
  if (fs::path jinja = dir / "chat_template.jinja"; fs::exists(jinja))
    impl->config.chat_templates["default"] = read_file(jinja.string(), "tokenizer");
  if (fs::path extra = dir / "additional_chat_templates"; fs::is_directory(extra)) {
    for (const auto& e : fs::directory_iterator(extra))
      if (e.path().extension() == ".jinja")
        impl->config.chat_templates[e.path().stem().string()] = read_file(e.path().string(), "tokenizer");
  }
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_json(const std::string& tokenizer_json, const std::string& tokenizer_config_json) {
  return Tokenizer(build(tokenizer_json, "tokenizer.json", tokenizer_config_json, "tokenizer_config.json"));
}

std::vector<int32_t> Tokenizer::encode(std::string_view input, bool add_special_tokens) const {
  const Impl& m = *impl_;
  std::string fixed;
  if (!is_valid_utf8(input)) {
    fixed = utf8_lossy(input);
    input = fixed;
  }
  std::vector<int32_t> ids;
  ids.reserve(input.size() / 3 + 4);
  for (const TokenSplit& raw : m.added.split(input, false)) {
    if (raw.id >= 0) {
      ids.push_back(raw.id);
      continue;
    }
    std::string_view seg = input.substr(raw.begin, raw.end - raw.begin);
    std::string norm = m.normalizer ? m.normalizer->normalize(std::string(seg)) : std::string(seg);
    for (const TokenSplit& ns : m.added.split(norm, true)) {
      if (ns.id >= 0)
        ids.push_back(ns.id);
      else
        m.encode_segment(std::string_view(norm).substr(ns.begin, ns.end - ns.begin), raw.begin == 0 && ns.begin == 0,
                         ids);
    }
  }
  if (add_special_tokens && m.post_processor) ids = m.post_processor->process(std::move(ids));
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  const Impl& m = *impl_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    std::optional<std::string_view> s;
    if (const AddedToken* t = m.added.by_id(id))
      s = t->content;
    else
      s = m.model->id_to_token(id);
    if (!s) continue;
    if (skip_special_tokens && m.special_contents.count(*s)) continue;
    tokens.emplace_back(*s);
  }
  std::string out;
  if (m.decoder) {
    m.decoder->decode_chain(tokens);
    for (const std::string& t : tokens) out += t;
  } else {
    for (size_t k = 0; k < tokens.size(); ++k) {
      if (k) out += ' ';
      out += tokens[k];
    }
    out = utf8_lossy(out);
  }
  if (m.config.clean_up_tokenization_spaces) out = clean_up_tokenization(std::move(out));
  return out;
}

int64_t Tokenizer::vocab_size() const { return impl_->vocab_size; }

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (auto id = impl_->added.id_of(token)) return id;
  return impl_->model->token_to_id(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  if (const AddedToken* t = impl_->added.by_id(id)) return t->content;
  auto s = impl_->model->id_to_token(id);
  return s ? std::string(*s) : std::string();
}

bool Tokenizer::is_special(int32_t id) const {
  const AddedToken* t = impl_->added.by_id(id);
  return t && t->special;
}

std::optional<int32_t> Tokenizer::bos_id() const {
  return impl_->config.bos_token ? token_to_id(*impl_->config.bos_token) : std::nullopt;
}

std::optional<int32_t> Tokenizer::eos_id() const {
  return impl_->config.eos_token ? token_to_id(*impl_->config.eos_token) : std::nullopt;
}

std::optional<int32_t> Tokenizer::pad_id() const {
  return impl_->config.pad_token ? token_to_id(*impl_->config.pad_token) : std::nullopt;
}

const TokenizerConfig& Tokenizer::config() const { return impl_->config; }

}  // namespace tern::text
