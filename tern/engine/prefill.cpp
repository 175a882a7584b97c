// Prompt prefill in bounded forwards.
#include "tern/engine/prefill.h"

#include <algorithm>
#include <limits>

#include "tern/base/error.h"
#include "tern/base/log.h"
#include "tern/base/timer.h"

namespace tern {

int64_t prefill_positions(int64_t rows, int64_t positions, int64_t max_tokens) {
  TERN_CHECK(rows >= 1 && positions >= 1, "[prefill] expected at least one row and one position, got {} x {}", rows,
             positions);
  if (max_tokens <= 0) return positions;
  return std::clamp<int64_t>(max_tokens / rows, 1, positions);
}

namespace {
// Positions until the first cache's precision transition (bf16-first storage, --kv-start S): a chunk
// then ends exactly there, so the positions read unquantized are the first S whatever the budget.
int64_t transition_room(const CacheList& caches) {
  int64_t room = std::numeric_limits<int64_t>::max();
  for (const auto& c : caches)
    if (c) room = std::min(room, c->max_append_tokens());  // KV-sharing layers own no cache
  return room;
}
}  // namespace

Tensor prefill(const Model& model, const Tensor& ids, CacheList& caches, int64_t max_tokens) {
  TERN_CHECK(ids.rank() == 2 && ids.dtype() == Dtype::i32, "[prefill] expected ids [B, P] i32, got {} {}",
             shape_str(ids.shape()), dtype_name(ids.dtype()));
  const int64_t B = ids.size(0), P = ids.size(1);
  const int64_t chunk = prefill_positions(B, P, max_tokens);
  if (max_tokens <= 0) return model.forward(ids, caches, false);
  Timer total;
  Every report(2.0);  // a long prefill logs its progress this often
  for (int64_t s = 0;;) {
    // Chunks end at multiples of `chunk` positions, and at a transition between them.
    const int64_t room = transition_room(caches);
    const int64_t end = std::min({(s / chunk + 1) * chunk, P, room < P - s ? s + room : P});
    // forward ends with the logits on the host, so the times below are the device's too.
    Tensor logits = model.forward(ids.narrow(1, s, end - s).contiguous(), caches, false);
    if (end == P) return logits;
    if (report.due()) {
      log_info("[prefill] {} of {} positions{}, {:.0f} tok/s", end, P, B > 1 ? fmt::format(" x {} rows", B) : "",
               static_cast<double>(B * end) / total.seconds());
    }
    s = end;
  }
}

}  // namespace tern
