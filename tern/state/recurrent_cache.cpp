// RecurrentCache: lazy zero state per batch size, snapshots by deep copy.
#include "tern/state/recurrent_cache.h"

#include "tern/state/cache_file.h"

namespace tern {

RecurrentCache::RecurrentCache(const RecurrentShape& shape) : shape_(shape) {
  TERN_CHECK(shape.conv_dim > 0 && shape.conv_kernel > 0 && shape.n_v_head > 0 && shape.d_k > 0 && shape.d_v > 0,
             "[recurrent-cache] expected positive conv_dim, conv_kernel, n_v_head, d_k, d_v, got {}, {}, {}, {}, {}",
             shape.conv_dim, shape.conv_kernel, shape.n_v_head, shape.d_k, shape.d_v);
}

Tensor RecurrentCache::next_positions(int64_t) const {
  TERN_THROW("[recurrent-cache] expected an attention layer to ask for rope positions, got a recurrent layer");
}

int64_t RecurrentCache::trim(int64_t n) {
  TERN_THROW("[recurrent-cache] expected snapshot/restore to roll back a recurrent state, got trim({})", n);
}

int64_t RecurrentCache::bytes() const {
  return (conv_.defined() ? conv_.nbytes() : 0) + (state_.defined() ? state_.nbytes() : 0);
}

void RecurrentCache::ensure(int64_t batch, Device device) {
  TERN_CHECK(batch > 0, "[recurrent-cache] expected a positive batch, got {}", batch);
  if (!state_.defined()) {
    conv_ = Tensor::zeros({batch, shape_.conv_kernel - 1, shape_.conv_dim}, Dtype::f32, device);
    state_ = Tensor::zeros({batch, shape_.n_v_head, shape_.d_k, shape_.d_v}, Dtype::f32, device);
  }
  TERN_CHECK(state_.size(0) == batch, "[recurrent-cache] expected batch {} (the batch it holds), got {}",
             state_.size(0), batch);
  if (state_.device() != device) {
    conv_ = conv_.to(device).contiguous();
    state_ = state_.to(device).contiguous();
  }
}

Tensor& RecurrentCache::conv_state(int64_t batch, Device device) {
  ensure(batch, device);
  return conv_;
}

Tensor& RecurrentCache::recurrent_state(int64_t batch, Device device) {
  ensure(batch, device);
  return state_;
}

void RecurrentCache::advance(int64_t n) {
  TERN_CHECK(n >= 0, "[recurrent-cache] expected a non-negative advance, got {}", n);
  offset_ += n;
}

void RecurrentCache::appended(int64_t n) {
  if (!step_) advance(n);
}

void RecurrentCache::reserve(int64_t) {
  TERN_CHECK(state_.defined(), "[recurrent-cache] expected a forward before reserve() (it allocates the state)");
}

void RecurrentCache::attach_step(const DeviceStep* step) {
  TERN_CHECK(!step || (state_.defined() && step->positions.device() == state_.device()),
             "[recurrent-cache] expected a compiled step on the state's device ({}), got {}",
             state_.defined() ? state_.device().str() : "no state", step ? step->positions.device().str() : "");
  TERN_CHECK(!step || !in_spec_round(), "[recurrent-cache] expected no speculative round when a step is attached");
  step_ = step;
}

RecurrentCache::Snapshot RecurrentCache::snapshot() const {
  Snapshot s;
  s.offset = offset_;
  if (state_.defined()) {
    s.conv = conv_.clone();
    s.state = state_.clone();
  }
  return s;
}

void RecurrentCache::restore(const Snapshot& s) {
  offset_ = s.offset;
  conv_ = s.conv.defined() ? s.conv.clone() : Tensor();
  state_ = s.state.defined() ? s.state.clone() : Tensor();
}

void RecurrentCache::save(CacheWriter& out) const {
  out.put_string("kind", "recurrent");
  out.put_int("offset", offset_);
  if (!state_.defined()) return;
  out.put_tensor("conv", conv_);
  out.put_tensor("state", state_);
}

void RecurrentCache::load(CacheReader& in) {
  in.expect("kind", "recurrent");
  const int64_t n = in.get_int("offset");
  if (n < 0) in.fail(fmt::format("expected a non-negative offset, got {}", n));
  conv_ = state_ = Tensor();
  offset_ = n;
  if (!in.has("conv")) return;
  Tensor c = in.get_tensor("conv"), s = in.get_tensor("state");
  const Shape want_c = {c.rank() == 3 ? c.size(0) : 1, shape_.conv_kernel - 1, shape_.conv_dim};
  const Shape want_s = {want_c[0], shape_.n_v_head, shape_.d_k, shape_.d_v};
  if (c.dtype() != Dtype::f32 || s.dtype() != Dtype::f32 || c.shape() != want_c || s.shape() != want_s ||
      want_c[0] <= 0)
    in.fail(fmt::format("expected conv {} and state {} f32, got {} {} and {} {}", shape_str(want_c),
                        shape_str(want_s), shape_str(c.shape()), dtype_name(c.dtype()), shape_str(s.shape()),
                        dtype_name(s.dtype())));
  conv_ = c;
  state_ = s;
}


void RecurrentCache::spec_round_begin() {
  TERN_CHECK(!step_, "[recurrent-cache] expected no speculative round while a compiled decode step is attached");
  Cache::spec_round_begin();
  round_ = snapshot();
}

void RecurrentCache::spec_round_commit() {
  Cache::spec_round_commit();
  round_ = Snapshot();
}

int64_t RecurrentCache::spec_round_rollback(int64_t keep) {
  check_spec_rollback(keep);
  restore(round_);
  round_ = Snapshot();
  end_spec_round();
  return keep;
}

}  // namespace tern
