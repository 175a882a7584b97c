// tokenizer.json post-processors: TemplateProcessing, ByteLevel, RobertaProcessing, BertProcessing
// and Sequence, for single sequences (what encode(text, add_special_tokens=true) applies).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "tern/text/json_util.h"

namespace tern::text {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // The ids with the special tokens the processor adds around one sequence.
  virtual std::vector<int32_t> process(std::vector<int32_t> ids) const = 0;
};

// Builds the processor a tokenizer.json "post_processor" value describes; nullptr for null.
// Throws tern::Error naming the field for an unknown type or a malformed field.
std::unique_ptr<PostProcessor> make_post_processor(const Json& j, const JsonPath& p);

}  // namespace tern::text
