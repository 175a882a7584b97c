// The normalizers of Hugging Face tokenizers, applied to whole strings.
#include "tern/text/normalizers.h"

#include <vector>

#include "tern/base/error.h"
#include "tern/text/unicode.h"

namespace tern::text {

namespace {

// Rebuilds s code point by code point through fn(c, out).
template <class F>
std::string map_chars(const std::string& s, F&& fn) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) fn(next_code_point(s, i), out);
  return out;
}

class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(NormalForm f) : form_(f) {}
  std::string normalize(std::string s) const override { return text::normalize(s, form_); }

 private:
  NormalForm form_;
};

class Lowercase final : public Normalizer {
 public:
  std::string normalize(std::string s) const override {
    return map_chars(s, [](char32_t c, std::string& out) { append_lowercase(out, c); });
  }
};

class Strip final : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  std::string normalize(std::string s) const override {
    size_t b = 0, e = s.size();
    if (left_) {
      while (b < e) {
        size_t j = b;
        if (!is_whitespace(next_code_point(s, j))) break;
        b = j;
      }
    }
    if (right_) {
      while (e > b) {
        size_t k = e - 1;
        while (k > b && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
        size_t j = k;
        if (!is_whitespace(next_code_point(s, j))) break;
        e = k;
      }
    }
    return s.substr(b, e - b);
  }

 private:
  bool left_, right_;
};

class StripAccents final : public Normalizer {
 public:
  std::string normalize(std::string s) const override {
    return map_chars(s, [](char32_t c, std::string& out) {
      if (!is_combining_mark(c)) append_utf8(out, c);
    });
  }
};

class Replace final : public Normalizer {
 public:
  Replace(Regex pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  std::string normalize(std::string s) const override {
    auto matches = pattern_.find_all(s);
    if (matches.empty()) return s;
    std::string out;
    out.reserve(s.size() + matches.size() * content_.size());
    size_t prev = 0;
    for (auto [b, e] : matches) {
      out.append(s, prev, b - prev);
      out += content_;
      prev = e;
    }
    out.append(s, prev, std::string::npos);
    return out;
  }

 private:
  Regex pattern_;
  std::string content_;
};

class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string normalize(std::string s) const override { return s.empty() ? s : prefix_ + s; }

 private:
  std::string prefix_;
};

class Nmt final : public Normalizer {
 public:
  std::string normalize(std::string s) const override {
    return map_chars(s, [](char32_t c, std::string& out) {
      if ((c >= 0x01 && c <= 0x08) || c == 0x0B || (c >= 0x0E && c <= 0x1F) || c == 0x7F || c == 0x8F || c == 0x9F)
        return;
      bool to_space = c == 0x09 || c == 0x0A || c == 0x0C || c == 0x0D || c == 0x1680 || (c >= 0x200B && c <= 0x200F) ||
                      c == 0x2028 || c == 0x2029 || c == 0x2581 || c == 0xFEFF || c == 0xFFFD;
      append_utf8(out, to_space ? U' ' : c);
    });
  }
};

class BertNormalizer final : public Normalizer {
 public:
  BertNormalizer(bool clean_text, bool chinese, bool strip_accents, bool lowercase)
      : clean_text_(clean_text), chinese_(chinese), strip_accents_(strip_accents), lowercase_(lowercase) {}
  std::string normalize(std::string s) const override {
    if (clean_text_) {
      s = map_chars(s, [](char32_t c, std::string& out) {
        if (c == 0 || c == 0xFFFD || is_control(c)) return;
        append_utf8(out, (c == '\t' || c == '\n' || c == '\r' || is_whitespace(c)) ? U' ' : c);
      });
    }
    if (chinese_) {
      s = map_chars(s, [](char32_t c, std::string& out) {
        if (is_cjk(c)) {
          out += ' ';
          append_utf8(out, c);
          out += ' ';
        } else {
          append_utf8(out, c);
        }
      });
    }
    if (strip_accents_) {
      s = map_chars(text::normalize(s, NormalForm::kNFD), [](char32_t c, std::string& out) {
        if (!is_nonspacing_mark(c)) append_utf8(out, c);
      });
    }
    if (lowercase_) s = map_chars(s, [](char32_t c, std::string& out) { append_lowercase(out, c); });
    return s;
  }

 private:
  bool clean_text_, chinese_, strip_accents_, lowercase_;
};

class ByteLevelNormalizer final : public Normalizer {
 public:
  std::string normalize(std::string s) const override {
    std::string out;
    out.reserve(s.size() * 2);
    for (unsigned char b : s) out += byte_char(b);
    return out;
  }
};

class Sequence final : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> items) : items_(std::move(items)) {}
  std::string normalize(std::string s) const override {
    for (const auto& n : items_) s = n->normalize(std::move(s));
    return s;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> items_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const Json& j, const JsonPath& p) {
  if (j.is_null()) return nullptr;
  std::string type = type_of(j, p);
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(NormalForm::kNFC);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(NormalForm::kNFD);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(NormalForm::kNFKC);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(NormalForm::kNFKD);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "Strip")
    return std::make_unique<Strip>(get_bool(j, "strip_left", p, true), get_bool(j, "strip_right", p, true));
  if (type == "StripAccents") return std::make_unique<StripAccents>();
  if (type == "Replace")
    return std::make_unique<Replace>(parse_pattern(require(j, "pattern", p), p / "pattern"),
                                     require_string(j, "content", p));
  if (type == "Prepend") return std::make_unique<Prepend>(require_string(j, "prepend", p));
  if (type == "Nmt") return std::make_unique<Nmt>();
  if (type == "BertNormalizer") {
    bool lowercase = get_bool(j, "lowercase", p, true);
    return std::make_unique<BertNormalizer>(get_bool(j, "clean_text", p, true),
                                            get_bool(j, "handle_chinese_chars", p, true),
                                            get_bool(j, "strip_accents", p, lowercase), lowercase);
  }
  if (type == "ByteLevel") return std::make_unique<ByteLevelNormalizer>();
  if (type == "Sequence") {
    const Json& arr = require(j, "normalizers", p);
    if (!arr.is_array()) (p / "normalizers").fail("an array", arr);
    std::vector<std::unique_ptr<Normalizer>> items;
    for (size_t i = 0; i < arr.size(); ++i) {
      auto n = make_normalizer(arr[i], (p / "normalizers").at(i));
      if (n) items.push_back(std::move(n));
    }
    return std::make_unique<Sequence>(std::move(items));
  }
  (p / "type").fail("a supported normalizer (NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, Replace, "
                    "Prepend, Nmt, BertNormalizer, ByteLevel, Sequence)",
                    "'" + type + "'");
}

}  // namespace tern::text
