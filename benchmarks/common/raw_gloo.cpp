// Raw Gloo collectives on the benchmark's own gloo context: a TCP device on the address idist's gloo
// backend listens on, its pairs connected by exchanging their addresses with idist::all_gather, so
// the benchmark needs only idist's public API and Gloo's.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/context.h>
#include <gloo/math.h>
#include <gloo/reduce_scatter.h>
#include <gloo/transport/context.h>
#include <gloo/transport/tcp/device.h>

#include <cstring>
#include <deque>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "common/raw_backend.hpp"
#include "idist/collectives.hpp"

namespace idist_bench {

namespace {

// A gloo context whose pairs are connected through idist: each rank creates one pair per peer and
// all-gathers their addresses with idist::all_gather (no rendezvous store is needed).
class IdistConnectedContext final : public gloo::Context {
 public:
  IdistConnectedContext(int rank, int size) : gloo::Context(rank, size) {}

  void connect(const std::shared_ptr<gloo::transport::Device>& device) {
    auto transport = device->createContext(rank, size);
    transport->setTimeout(getTimeout());
    // This rank's pair addresses, one per peer in rank order, each prefixed by its length.
    std::string mine;
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      const std::vector<char> address = transport->createPair(peer)->address().bytes();
      mine += std::to_string(address.size()) + ':' + std::string(address.begin(), address.end());
    }
    const std::vector<std::string> all = idist::all_gather(std::string_view(mine));
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      transport->getPair(peer)->connect(address_for(all[std::size_t(peer)], peer));
    }
    device_ = device;
    transportContext_ = std::move(transport);
  }

 private:
  // The address rank `peer` created for this rank: entry `rank` of its list, one lower past itself.
  std::vector<char> address_for(const std::string& list, int peer) const {
    const int index = rank < peer ? rank : rank - 1;
    std::size_t pos = 0;
    for (int i = 0;; ++i) {
      const std::size_t colon = list.find(':', pos);
      if (colon == std::string::npos) throw std::runtime_error("raw gloo: short address list from a peer");
      const std::size_t len = std::stoul(list.substr(pos, colon - pos));
      if (i == index) return std::vector<char>(list.begin() + long(colon + 1), list.begin() + long(colon + 1 + len));
      pos = colon + 1 + len;
    }
  }
};

// The address idist's gloo backend listens on: the second word of network_interface()
// ("eth0 198.18.0.2 (why)"), the loopback when it says nothing.
std::string listen_address(const idist::ComputationModel& model) {
  std::istringstream words(model.network_interface().value_or("lo 127.0.0.1"));
  std::string iface, address;
  words >> iface >> address;
  return address.empty() ? "127.0.0.1" : address;
}

std::shared_ptr<gloo::Context> connect_world(const idist::ComputationModel& model) {
  gloo::transport::tcp::attr attr;
  attr.hostname = listen_address(model);
  auto context = std::make_shared<IdistConnectedContext>(model.rank(), model.world_size());
  context->setTimeout(model.timeout());
  context->connect(gloo::transport::tcp::CreateDevice(attr));
  return context;
}

class RawGloo final : public RawBackend {
 public:
  RawGloo(std::shared_ptr<gloo::Context> ctx, std::chrono::milliseconds timeout)
      : ctx_(std::move(ctx)), timeout_(timeout) {}

  std::string call_name(const std::string& op) const override {
    if (op == "all_reduce") return "gloo::allreduce";
    if (op == "all_gather") return "gloo::allgather";
    if (op == "broadcast") return "gloo::broadcast";
    if (op == "reduce_scatter")
      return (ctx_->size & (ctx_->size - 1)) ? "gloo::allreduce" : "gloo::ReduceScatterHalvingDoubling";
    if (op == "all_to_all") return "gloo::alltoall";
    return "gloo::barrier";
  }

  // What torch's ProcessGroupGloo does for a float sum: the ring algorithm with gloo::sum<float>.
  void all_reduce_sum(float* data, std::size_t count) override {
    gloo::AllreduceOptions o(ctx_);
    o.setOutput(data, count);
    o.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    o.setTimeout(timeout_);
    gloo::allreduce(o);
  }
  void all_gather(const float* in, float* out, std::size_t count) override {
    gloo::AllgatherOptions o(ctx_);
    o.setInput(const_cast<float*>(in), count);
    o.setOutput(out, count * std::size_t(ctx_->size));
    o.setTimeout(timeout_);
    gloo::allgather(o);
  }
  void broadcast(float* data, std::size_t count, int root) override {
    gloo::BroadcastOptions o(ctx_);
    o.setOutput(data, count);
    o.setRoot(root);
    o.setTimeout(timeout_);
    gloo::broadcast(o);
  }
  // Gloo's reduce-scatter is built once per buffer and run many times (as Gloo intends); it reduces
  // that buffer in place, so a user copies the input in and the block out. The last few built are
  // kept: one freed right after its run may still have notifications in Gloo's transport.
  void reduce_scatter_sum(const float* in, float* out, std::size_t count) override {
    const std::size_t total = count * std::size_t(ctx_->size);
    if ((ctx_->size & (ctx_->size - 1)) != 0) {
      // What idist does there too: ReduceScatterHalvingDoubling gave wrong sums on 3 ranks.
      std::vector<float> work(in, in + total);
      all_reduce_sum(work.data(), total);
      std::memcpy(out, work.data() + std::size_t(ctx_->rank) * count, count * sizeof(float));
      return;
    }
    ReduceScatter* rs = nullptr;
    for (auto& r : reduce_scatters_)
      if (r->work.size() == total) rs = r.get();
    if (!rs) {
      auto made = std::make_unique<ReduceScatter>();
      made->work.assign(total, 0.0f);
      made->algorithm = std::make_unique<gloo::ReduceScatterHalvingDoubling<float>>(
          ctx_, std::vector<float*>{made->work.data()}, int(total),
          std::vector<int>(std::size_t(ctx_->size), int(count)));
      rs = made.get();
      reduce_scatters_.push_back(std::move(made));
      if (reduce_scatters_.size() > 4) reduce_scatters_.pop_front();
    }
    std::memcpy(rs->work.data(), in, total * sizeof(float));
    rs->algorithm->run();
    std::memcpy(out, rs->work.data(), count * sizeof(float));
  }
  void all_to_all(const float* in, float* out, std::size_t count) override {
    gloo::AlltoallOptions o(ctx_);
    o.setInput(const_cast<float*>(in), count * std::size_t(ctx_->size));
    o.setOutput(out, count * std::size_t(ctx_->size));
    o.setTimeout(timeout_);
    gloo::alltoall(o);
  }
  void barrier() override {
    gloo::BarrierOptions o(ctx_);
    o.setTimeout(timeout_);
    gloo::barrier(o);
  }

 private:
  std::shared_ptr<gloo::Context> ctx_;
  std::chrono::milliseconds timeout_;
  struct ReduceScatter {
    std::vector<float> work;  // reduced in place by `algorithm`
    std::unique_ptr<gloo::ReduceScatterHalvingDoubling<float>> algorithm;
  };
  std::deque<std::unique_ptr<ReduceScatter>> reduce_scatters_;
};

}  // namespace

std::unique_ptr<RawBackend> make_raw_gloo(idist::ComputationModel& model, RawKind kind) {
  if (kind != RawKind::Blocking) return nullptr;  // gloo's algorithms only block
  return std::make_unique<RawGloo>(connect_world(model), model.timeout());
}

}  // namespace idist_bench
