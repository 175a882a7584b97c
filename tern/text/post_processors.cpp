// Post-processors for single sequences.
#include "tern/text/post_processors.h"

#include <map>
#include <string>

#include "tern/base/error.h"

namespace tern::text {

namespace {

// A template: ids to insert, with the sequence itself where `is_sequence` is set.
class Template final : public PostProcessor {
 public:
  struct Item {
    bool is_sequence;
    std::vector<int32_t> ids;
  };
  explicit Template(std::vector<Item> items) : items_(std::move(items)) {}
  std::vector<int32_t> process(std::vector<int32_t> ids) const override {
    std::vector<int32_t> out;
    out.reserve(ids.size() + 4);
    for (const Item& it : items_) {
      if (it.is_sequence)
        out.insert(out.end(), ids.begin(), ids.end());
      else
        out.insert(out.end(), it.ids.begin(), it.ids.end());
    }
    return out;
  }

 private:
  std::vector<Item> items_;
};

class Identity final : public PostProcessor {
 public:
  std::vector<int32_t> process(std::vector<int32_t> ids) const override { return ids; }
};

class Sequence final : public PostProcessor {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PostProcessor>> items) : items_(std::move(items)) {}
  std::vector<int32_t> process(std::vector<int32_t> ids) const override {
    for (const auto& p : items_) ids = p->process(std::move(ids));
    return ids;
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> items_;
};

// A ["token", id] pair of Roberta/Bert processors.
int32_t pair_id(const Json& j, const JsonPath& p) {
  if (!j.is_array() || j.size() != 2 || !j[1].is_number_integer()) p.fail("a [token, id] pair", j);
  return j[1].get<int32_t>();
}

std::unique_ptr<PostProcessor> make_template(const Json& j, const JsonPath& p) {
  std::map<std::string, std::vector<int32_t>> specials;
  if (j.contains("special_tokens")) {
    const Json& st = j["special_tokens"];
    if (!st.is_object()) (p / "special_tokens").fail("an object", st);
    for (auto it = st.begin(); it != st.end(); ++it) {
      JsonPath at = p / "special_tokens" / it.key();
      const Json& ids = require(*it, "ids", at);
      if (!ids.is_array()) (at / "ids").fail("an array of ids", ids);
      std::vector<int32_t> v;
      for (const Json& id : ids) {
        if (!id.is_number_integer()) (at / "ids").fail("integer ids", id);
        v.push_back(id.get<int32_t>());
      }
      specials[it.key()] = std::move(v);
    }
  }
  const Json& single = require(j, "single", p);
  if (!single.is_array()) (p / "single").fail("an array", single);
  std::vector<Template::Item> items;
  for (size_t i = 0; i < single.size(); ++i) {
    const Json& e = single[i];
    JsonPath at = (p / "single").at(i);
    if (e.is_object() && e.contains("SpecialToken")) {
      std::string id = require_string(e["SpecialToken"], "id", at / "SpecialToken");
      auto it = specials.find(id);
      if (it == specials.end()) (at / "SpecialToken" / "id").fail("a token listed in special_tokens", "'" + id + "'");
      items.push_back({false, it->second});
    } else if (e.is_object() && e.contains("Sequence")) {
      items.push_back({true, {}});
    } else {
      at.fail("{\"SpecialToken\": ...} or {\"Sequence\": ...}", e);
    }
  }
  return std::make_unique<Template>(std::move(items));
}

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor(const Json& j, const JsonPath& p) {
  if (j.is_null()) return nullptr;
  std::string type = type_of(j, p);
  if (type == "TemplateProcessing") return make_template(j, p);
  if (type == "ByteLevel") return std::make_unique<Identity>();  // it only trims offsets
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    int32_t cls = pair_id(require(j, "cls", p), p / "cls"), sep = pair_id(require(j, "sep", p), p / "sep");
    return std::make_unique<Template>(std::vector<Template::Item>{{false, {cls}}, {true, {}}, {false, {sep}}});
  }
  if (type == "Sequence") {
    const Json& arr = require(j, "processors", p);
    if (!arr.is_array()) (p / "processors").fail("an array", arr);
    std::vector<std::unique_ptr<PostProcessor>> items;
    for (size_t i = 0; i < arr.size(); ++i) {
      auto pp = make_post_processor(arr[i], (p / "processors").at(i));
      if (pp) items.push_back(std::move(pp));
    }
    return std::make_unique<Sequence>(std::move(items));
  }
  (p / "type").fail("a supported post-processor (TemplateProcessing, ByteLevel, RobertaProcessing, "
                    "BertProcessing, Sequence)",
                    "'" + type + "'");
}

}  // namespace tern::text
