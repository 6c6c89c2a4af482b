// The tensor-communication layer (comm.hpp): the only file of src/torch that reads the current
// ComputationModel.
#include "torch/comm/comm.hpp"

#include <utility>

#include "idist/context.hpp"
#include "idist/detail/collectives.hpp"
#include "torch/comm/staging.hpp"

namespace idist::detail::comm {

namespace {

c10::Device device_of(const ComputationModel& m) { return to_torch_device(m.buffer_device()); }

// The end of an operation in place on `t`, staged as `s`.
Work finish_in_place(Work w, const at::Tensor& t, const Staged& s, Completion how) {
  if (how == Completion::Blocking) {
    copy_back(t, s);
    return w;
  }
  return std::move(finish_into(w, t, s));
}

// The end of an operation from `in` (kept alive) into `out`, staged as `staged_out`.
Work finish_out(Work w, const Staged& in, const at::Tensor& out, const Staged& staged_out, Completion how) {
  if (how == Completion::Blocking) {
    copy_back(out, staged_out);
    return w;
  }
  // One continuation per operation: the write-back, or only the staged tensors kept alive.
  if (staged_out.copied) {
    w.then([dst = out.detach(), src = staged_out.buffer, keep = in.buffer]() mutable {
      at::NoGradGuard no_grad;
      dst.copy_(src);
    });
  } else {
    w.then([keep_in = in.buffer, keep_out = staged_out.buffer] { (void)keep_in, (void)keep_out; });
  }
  return w;
}

ConstBuffer const_buffer(const Staged& s) {
  return s.buffer.defined() ? ConstBuffer(tensor_buffer(s.buffer)) : ConstBuffer{};
}
Buffer buffer(const Staged& s) { return s.buffer.defined() ? tensor_buffer(s.buffer) : Buffer{}; }
Staged stage_if_defined(const at::Tensor& t, c10::Device dev) { return t.defined() ? stage(t, dev) : Staged{}; }

// Operation `type` in place on `t`: checked (defined, a dtype idist carries), staged on the backend's
// device, issued by `op(model, buffer)`, written back as `how` says.
template <class Op>
Work in_place(OpType type, const at::Tensor& t, Completion how, Op op) {
  checked_dtype(t, to_string(type));
  ComputationModel& m = current_model();
  const Staged s = stage(t, device_of(m));
  return finish_in_place(op(m, tensor_buffer(s.buffer)), t, s, how);
}

// An operation from `in` into `out`, each staged on the backend's device (an undefined tensor, where
// this rank does not use that side, stays unstaged), issued by `op(model, in, out)`, finished as `how`
// says.
template <class Op>
Work in_out(const at::Tensor& in, const at::Tensor& out, Completion how, Op op) {
  ComputationModel& m = current_model();
  const c10::Device dev = device_of(m);
  const Staged from = stage_if_defined(in, dev);
  const Staged to = stage_if_defined(out, dev);
  return finish_out(op(m, const_buffer(from), buffer(to)), from, out, to, how);
}

}  // namespace

int rank() { return current_model().rank(); }
int world_size() { return current_model().world_size(); }
const ProcessGroup& process_group(const Group& group) { return current_model().process_group(group); }
c10::Device device() { return device_of(current_model()); }

Completion bucket_completion() {
  return current_model().has_async_progress() ? Completion::Async : Completion::Blocking;
}

void check_src(int src, std::string_view fn) { detail::check_src(current_model(), src, fn); }

Work all_reduce(const at::Tensor& t, ReduceOp op, const Group& group, Completion how) {
  return in_place(OpType::AllReduce, t, how,
                  [&](ComputationModel& m, Buffer b) { return m.all_reduce(b, op, group, how); });
}

Work broadcast(const at::Tensor& t, int src, const Group& group, Completion how) {
  return in_place(OpType::Broadcast, t, how,
                  [&](ComputationModel& m, Buffer b) { return m.broadcast(b, src, group, how); });
}

Work reduce(const at::Tensor& t, int dst, ReduceOp op, const Group& group, Completion how) {
  return in_place(OpType::Reduce, t, how,
                  [&](ComputationModel& m, Buffer b) { return m.reduce(b, op, dst, group, how); });
}

Work all_gather(const at::Tensor& in, const at::Tensor& out, const Group& group, Completion how) {
  return in_out(in, out, how,
                [&](ComputationModel& m, ConstBuffer i, Buffer o) { return m.all_gather(i, o, group, how); });
}

Work all_gather_v(const at::Tensor& in, const at::Tensor& out, std::span<const std::size_t> counts, const Group& group,
                  Completion how) {
  return in_out(in, out, how,
                [&](ComputationModel& m, ConstBuffer i, Buffer o) { return m.all_gather_v(i, o, counts, group, how); });
}

Work gather(const at::Tensor& in, const at::Tensor& out, int dst, const Group& group, Completion how) {
  return in_out(in, out, how,
                [&](ComputationModel& m, ConstBuffer i, Buffer o) { return m.gather(i, o, dst, group, how); });
}

Work scatter(const at::Tensor& in, const at::Tensor& out, int src, const Group& group, Completion how) {
  return in_out(in, out, how,
                [&](ComputationModel& m, ConstBuffer i, Buffer o) { return m.scatter(i, o, src, group, how); });
}

Work reduce_scatter(const at::Tensor& in, const at::Tensor& out, ReduceOp op, const Group& group, Completion how) {
  return in_out(in, out, how,
                [&](ComputationModel& m, ConstBuffer i, Buffer o) { return m.reduce_scatter(i, o, op, group, how); });
}

Work reduce_scatter_v(const at::Tensor& in, const at::Tensor& out, std::span<const std::size_t> counts, ReduceOp op,
                      const Group& group, Completion how) {
  return in_out(in, out, how, [&](ComputationModel& m, ConstBuffer i, Buffer o) {
    return m.reduce_scatter_v(i, o, counts, op, group, how);
  });
}

Work all_to_all(const at::Tensor& in, const at::Tensor& out, const Group& group, Completion how) {
  return in_out(in, out, how,
                [&](ComputationModel& m, ConstBuffer i, Buffer o) { return m.all_to_all(i, o, group, how); });
}

Work all_to_all_v(const at::Tensor& in, const at::Tensor& out, std::span<const std::size_t> out_counts,
                  std::span<const std::size_t> in_counts, const Group& group, Completion how) {
  return in_out(in, out, how, [&](ComputationModel& m, ConstBuffer i, Buffer o) {
    return m.all_to_all_v(i, o, out_counts, in_counts, group, how);
  });
}

Work send(const at::Tensor& t, int dst, int tag, Completion how) {
  checked_dtype(t, to_string(OpType::Send));
  ComputationModel& m = current_model();
  const Staged s = stage(t, device_of(m));
  Work w = m.send(const_buffer(s), dst, tag, how);
  if (how == Completion::Async) w.then([keep = s.buffer] { (void)keep; });
  return w;
}

Work recv(const at::Tensor& t, int src, int tag, Completion how) {
  return in_place(OpType::Recv, t, how, [&](ComputationModel& m, Buffer b) { return m.recv(b, src, tag, how); });
}

}  // namespace idist::detail::comm
