// Raw MPI collectives on the benchmark's own duplicate of MPI_COMM_WORLD (MPI was initialized by
// idist's mpi backend; a duplicate communicator shares its transports and connections).
#include <mpi.h>

#include <stdexcept>
#include <string>

#include "common/raw_backend.hpp"

namespace idist_bench {

namespace {

void check(int rc, const char* fn) {
  if (rc != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    throw std::runtime_error(std::string(fn) + " failed: " + std::string(text, std::size_t(len)));
  }
}

class RawMpi final : public RawBackend {
 public:
  explicit RawMpi(bool nonblocking) : nb_(nonblocking) {
    check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  }
  ~RawMpi() override { MPI_Comm_free(&comm_); }
  RawMpi(const RawMpi&) = delete;
  RawMpi& operator=(const RawMpi&) = delete;

  std::string call_name(const std::string& op) const override {
    if (op == "all_reduce") return nb_ ? "MPI_Iallreduce" : "MPI_Allreduce";
    if (op == "all_gather") return nb_ ? "MPI_Iallgather" : "MPI_Allgather";
    if (op == "broadcast") return nb_ ? "MPI_Ibcast" : "MPI_Bcast";
    if (op == "reduce_scatter") return nb_ ? "MPI_Ireduce_scatter_block" : "MPI_Reduce_scatter_block";
    if (op == "all_to_all") return nb_ ? "MPI_Ialltoall" : "MPI_Alltoall";
    return nb_ ? "MPI_Ibarrier" : "MPI_Barrier";
  }

  void all_reduce_sum(float* data, std::size_t count) override {
    if (!nb_) return check(MPI_Allreduce(MPI_IN_PLACE, data, int(count), MPI_FLOAT, MPI_SUM, comm_), "MPI_Allreduce");
    MPI_Request r;
    check(MPI_Iallreduce(MPI_IN_PLACE, data, int(count), MPI_FLOAT, MPI_SUM, comm_, &r), "MPI_Iallreduce");
    check(MPI_Wait(&r, MPI_STATUS_IGNORE), "MPI_Wait");
  }
  void all_gather(const float* in, float* out, std::size_t count) override {
    if (!nb_)
      return check(MPI_Allgather(in, int(count), MPI_FLOAT, out, int(count), MPI_FLOAT, comm_), "MPI_Allgather");
    MPI_Request r;
    check(MPI_Iallgather(in, int(count), MPI_FLOAT, out, int(count), MPI_FLOAT, comm_, &r), "MPI_Iallgather");
    check(MPI_Wait(&r, MPI_STATUS_IGNORE), "MPI_Wait");
  }
  void broadcast(float* data, std::size_t count, int root) override {
    if (!nb_) return check(MPI_Bcast(data, int(count), MPI_FLOAT, root, comm_), "MPI_Bcast");
    MPI_Request r;
    check(MPI_Ibcast(data, int(count), MPI_FLOAT, root, comm_, &r), "MPI_Ibcast");
    check(MPI_Wait(&r, MPI_STATUS_IGNORE), "MPI_Wait");
  }
  void reduce_scatter_sum(const float* in, float* out, std::size_t count) override {
    if (!nb_)
      return check(MPI_Reduce_scatter_block(in, out, int(count), MPI_FLOAT, MPI_SUM, comm_),
                   "MPI_Reduce_scatter_block");
    MPI_Request r;
    check(MPI_Ireduce_scatter_block(in, out, int(count), MPI_FLOAT, MPI_SUM, comm_, &r), "MPI_Ireduce_scatter_block");
    check(MPI_Wait(&r, MPI_STATUS_IGNORE), "MPI_Wait");
  }
  void all_to_all(const float* in, float* out, std::size_t count) override {
    if (!nb_) return check(MPI_Alltoall(in, int(count), MPI_FLOAT, out, int(count), MPI_FLOAT, comm_), "MPI_Alltoall");
    MPI_Request r;
    check(MPI_Ialltoall(in, int(count), MPI_FLOAT, out, int(count), MPI_FLOAT, comm_, &r), "MPI_Ialltoall");
    check(MPI_Wait(&r, MPI_STATUS_IGNORE), "MPI_Wait");
  }
  void barrier() override {
    if (!nb_) return check(MPI_Barrier(comm_), "MPI_Barrier");
    MPI_Request r;
    check(MPI_Ibarrier(comm_, &r), "MPI_Ibarrier");
    check(MPI_Wait(&r, MPI_STATUS_IGNORE), "MPI_Wait");
  }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  bool nb_;
};

}  // namespace

std::unique_ptr<RawBackend> make_raw_mpi(RawKind kind) {
  return std::make_unique<RawMpi>(kind == RawKind::NonBlocking);
}

}  // namespace idist_bench
