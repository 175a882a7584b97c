// The decoders of Hugging Face tokenizers.
#include "tern/text/decoders.h"

#include "tern/base/error.h"
#include "tern/text/unicode.h"

namespace tern::text {

// "<0xAB>" -> 0xAB, as u8::from_str_radix parses the two characters (a leading '+' is allowed).
int parse_byte_token(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (t[3] == '+') return hex(t[4]);
  int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

namespace {

class ByteLevel final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& t : tokens) {
      size_t start = bytes.size();
      size_t i = 0;
      bool all = true;
      while (i < t.size()) {
        int b = char_byte(next_code_point(t, i));
        if (b < 0) {
          all = false;
          break;
        }
        bytes += static_cast<char>(b);
      }
      if (!all) {  // a token with characters outside the byte map is taken as it is
        bytes.resize(start);
        bytes += t;
      }
    }
    tokens.assign(1, utf8_lossy(bytes));
  }
};

class Metaspace final : public Decoder {
 public:
  Metaspace(std::string rep, bool strip_first) : rep_(std::move(rep)), strip_first_(strip_first) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t k = 0; k < tokens.size(); ++k) {
      std::string& t = tokens[k];
      std::string out;
      out.reserve(t.size());
      size_t i = 0;
      while (i < t.size()) {
        if (t.compare(i, rep_.size(), rep_) == 0) {
          if (!(k == 0 && strip_first_)) out += ' ';
          i += rep_.size();
        } else {
          out += t[i++];
        }
      }
      t = std::move(out);
    }
  }

 private:
  std::string rep_;
  bool strip_first_;
};

class Replace final : public Decoder {
 public:
  Replace(Regex pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      auto matches = pattern_.find_all(t);
      if (matches.empty()) continue;
      std::string out;
      size_t prev = 0;
      for (auto [b, e] : matches) {
        out.append(t, prev, b - prev);
        out += content_;
        prev = e;
      }
      out.append(t, prev, std::string::npos);
      t = std::move(out);
    }
  }

 private:
  Regex pattern_;
  std::string content_;
};

class ByteFallback final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string pending;
    auto flush = [&] {
      if (pending.empty()) return;
      if (is_valid_utf8(pending)) {
        out.push_back(pending);
      } else {
        for (size_t k = 0; k < pending.size(); ++k) out.emplace_back("\xEF\xBF\xBD");
      }
      pending.clear();
    };
    for (std::string& t : tokens) {
      int b = parse_byte_token(t);
      if (b >= 0) {
        pending += static_cast<char>(b);
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }
};

class Fuse final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

class Strip final : public Decoder {
 public:
  Strip(char32_t content, size_t start, size_t stop) : content_(content), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      std::vector<std::pair<size_t, char32_t>> chars;  // (byte offset, code point)
      size_t i = 0;
      while (i < t.size()) {
        size_t b = i;
        chars.emplace_back(b, next_code_point(t, i));
      }
      size_t start_cut = 0;
      for (size_t k = 0; k < std::min(start_, chars.size()) && chars[k].second == content_; ++k) start_cut = k + 1;
      size_t stop_cut = chars.size();
      for (size_t k = 0; k < stop_ && k < chars.size(); ++k) {
        size_t idx = chars.size() - k - 1;
        if (chars[idx].second != content_) break;
        stop_cut = idx;
      }
      if (stop_cut < start_cut) stop_cut = start_cut;
      size_t b = start_cut < chars.size() ? chars[start_cut].first : t.size();
      size_t e = stop_cut < chars.size() ? chars[stop_cut].first : t.size();
      t = t.substr(b, e - b);
    }
  }

 private:
  char32_t content_;
  size_t start_, stop_;
};

class WordPiece final : public Decoder {
 public:
  WordPiece(std::string prefix, bool cleanup) : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t k = 0; k < tokens.size(); ++k) {
      std::string& t = tokens[k];
      if (k != 0) {
        if (t.compare(0, prefix_.size(), prefix_) == 0)
          t = t.substr(prefix_.size());
        else
          t = " " + t;
      }
      if (cleanup_) t = cleanup(t);
    }
  }

  // transformers' clean_up_tokenization
  static std::string cleanup(std::string s) {
    static const std::pair<std::string_view, std::string_view> kRules[] = {
        {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
        {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    for (auto [from, to] : kRules) {
      std::string out;
      size_t prev = 0, at;
      while ((at = s.find(from, prev)) != std::string::npos) {
        out.append(s, prev, at - prev);
        out += to;
        prev = at + from.size();
      }
      out.append(s, prev, std::string::npos);
      s = std::move(out);
    }
    return s;
  }

 private:
  std::string prefix_;
  bool cleanup_;
};

class BpeDecoder final : public Decoder {
 public:
  explicit BpeDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t k = 0; k < tokens.size(); ++k) {
      std::string& t = tokens[k];
      std::string rep = k + 1 == tokens.size() ? "" : " ";
      std::string out;
      size_t prev = 0, at;
      while (!suffix_.empty() && (at = t.find(suffix_, prev)) != std::string::npos) {
        out.append(t, prev, at - prev);
        out += rep;
        prev = at + suffix_.size();
      }
      out.append(t, prev, std::string::npos);
      t = std::move(out);
    }
  }

 private:
  std::string suffix_;
};

class Sequence final : public Decoder {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Decoder>> items) : items_(std::move(items)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& d : items_) d->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> items_;
};

}  // namespace

std::unique_ptr<Decoder> make_decoder(const Json& j, const JsonPath& p) {
  if (j.is_null()) return nullptr;
  std::string type = type_of(j, p);
  if (type == "ByteLevel") return std::make_unique<ByteLevel>();
  if (type == "Metaspace") {
    std::string rep = get_string(j, "replacement", p, "\xE2\x96\x81");
    single_char(rep, p / "replacement");
    bool strip = get_bool(j, "add_prefix_space", p, true);
    if (j.contains("prepend_scheme") && !j["prepend_scheme"].is_null())
      strip = get_string(j, "prepend_scheme", p) != "never";
    return std::make_unique<Metaspace>(rep, strip);
  }
  if (type == "Replace")
    return std::make_unique<Replace>(parse_pattern(require(j, "pattern", p), p / "pattern"),
                                     require_string(j, "content", p));
  if (type == "ByteFallback") return std::make_unique<ByteFallback>();
  if (type == "Fuse") return std::make_unique<Fuse>();
  if (type == "Strip") {
    int64_t start = get_int(j, "start", p, 0), stop = get_int(j, "stop", p, 0);
    if (start < 0 || stop < 0) p.fail("non-negative start and stop", fmt::format("{} and {}", start, stop));
    return std::make_unique<Strip>(single_char(require_string(j, "content", p), p / "content"),
                                   static_cast<size_t>(start), static_cast<size_t>(stop));
  }
  if (type == "WordPiece")
    return std::make_unique<WordPiece>(get_string(j, "prefix", p, "##"), get_bool(j, "cleanup", p, true));
  if (type == "BPEDecoder") return std::make_unique<BpeDecoder>(get_string(j, "suffix", p, "</w>"));
  if (type == "Sequence") {
    const Json& arr = require(j, "decoders", p);
    if (!arr.is_array()) (p / "decoders").fail("an array", arr);
    std::vector<std::unique_ptr<Decoder>> items;
    for (size_t i = 0; i < arr.size(); ++i) {
      auto d = make_decoder(arr[i], (p / "decoders").at(i));
      if (d) items.push_back(std::move(d));
    }
    return std::make_unique<Sequence>(std::move(items));
  }
  (p / "type").fail("a supported decoder (ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, WordPiece, "
                    "BPEDecoder, Sequence)",
                    "'" + type + "'");
}

std::string clean_up_tokenization(std::string s) { return WordPiece::cleanup(std::move(s)); }

}  // namespace tern::text
