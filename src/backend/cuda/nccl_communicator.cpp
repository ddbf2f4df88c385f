// Tensor parallelism over the GPUs of one process through NCCL: one communicator per device made by
// ncclCommInitAll, each rank's all-reduce enqueued on its backend's stream (no host wait; CUDA graphs
// capture it). NVLink multicast (NVLS) stays off: the shared GPU hosts forbid cuMulticastCreate.
// Start-up is bounded: a group that does not form in PAGODA_NCCL_INIT_TIMEOUT seconds (default 120)
// is an error, not a hang. A rank that fails mid-step aborts every communicator of the group, so no
// rank's kernels wait forever for a partner that will not come. Sums that fit a slot of the
// peer-memory group (p2p_all_reduce.h; 4 MiB: every decode step's, most of a chunk's) go through it
// instead — one kernel, one flag exchange — when every pair of the devices can reach each other's
// memory, unless --disable-custom-all-reduce (vLLM's flag for its own custom all-reduce).
#include "backend/cuda/nccl_communicator.h"

#include <chrono>
#include <cstdlib>
#include <future>
#include <mutex>
#include <string>
#include <thread>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_util.h"
#include "backend/cuda/p2p_all_reduce.h"
#include "backend/timed_backend.h"
#include "core/error.h"
#include "core/log.h"

#ifdef PAGODA_HAS_NCCL
#include <cuda_runtime.h>
#include <nccl.h>
#endif

namespace pagoda {

#ifdef PAGODA_HAS_NCCL
namespace {

void nccl_check(ncclResult_t r, const std::string& what) {
  if (r != ncclSuccess) throw Error("NCCL: " + what + " failed: " + ncclGetErrorString(r));
}

ncclDataType_t nccl_type(DType dtype) {
  if (dtype == DType::BF16) return ncclBfloat16;
  if (dtype == DType::F16) return ncclFloat16;
  check(dtype == DType::F32, std::string("the NCCL communicator moves f32, bf16 or f16, not ") + dtype_name(dtype));
  return ncclFloat32;
}

struct NcclGroup {
  std::vector<ncclComm_t> comms;
  std::shared_ptr<cuda::P2pGroup> p2p;  // null: every sum through NCCL
  std::once_flag aborted;
  ~NcclGroup() {
    for (ncclComm_t c : comms)
      if (c != nullptr) ncclCommDestroy(c);
  }
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(std::shared_ptr<NcclGroup> group, int rank) : group_(std::move(group)), rank_(rank) {}
  int rank() const override { return rank_; }
  int world() const override { return static_cast<int>(group_->comms.size()); }

  void all_reduce_sum(Backend& be, Tensor& x) override {
    auto* cuda = dynamic_cast<CudaBackend*>(&unwrap_timed(be));  // the profiler may wrap it
    check(cuda != nullptr, "the NCCL communicator sums tensors of the CUDA backend, not " + be.name());
    check(x.is_contiguous(), "the NCCL communicator sums contiguous tensors");
    const ncclDataType_t type = nccl_type(x.dtype);
    const bool p2p = group_->p2p && cuda::p2p_takes(*group_->p2p, x.nbytes());
    record_external_op(be, p2p ? "all_reduce_p2p" : "all_reduce", std::to_string(x.row_numel()) + " " + dtype_name(x.dtype),
                       static_cast<double>(x.nbytes()));
    if (p2p) {
      cuda->activate();  // the kernel launches on the current device
      cuda::launch_p2p_all_reduce(*group_->p2p, rank_, x, cuda->stream());
      return;
    }
    nccl_check(ncclAllReduce(x.data, x.data, static_cast<size_t>(x.numel()), type, ncclSum,
                             group_->comms[static_cast<size_t>(rank_)], cuda->stream()),
               "all-reduce on rank " + std::to_string(rank_));
  }

  void all_gather_cols(Backend& be, const Tensor& x, Tensor& scratch, Tensor& out) override {
    auto* cuda = dynamic_cast<CudaBackend*>(&unwrap_timed(be));
    check(cuda != nullptr, "the NCCL communicator gathers tensors of the CUDA backend, not " + be.name());
    const int world = this->world();
    const int64_t rows = x.ndim ? x.shape[0] : 1, cols = x.row_numel();
    const size_t esz = dtype_size(x.dtype);
    check(x.is_contiguous() && scratch.is_contiguous() && scratch.dtype == x.dtype && out.dtype == x.dtype &&
              scratch.numel() >= world * x.numel() && out.ndim == 2 && out.shape[0] == rows &&
              out.shape[1] == cols * world,
          "the NCCL communicator gathers " + cuda::shape_str(x) + " from " + std::to_string(world) + " ranks into " +
              cuda::shape_str(out) + " through " + cuda::shape_str(scratch) + ": shapes or dtypes that do not fit");
    record_external_op(be, "all_gather", std::to_string(cols) + " " + dtype_name(x.dtype),
                       static_cast<double>(x.nbytes()) * world);
    cuda->activate();
    nccl_check(ncclAllGather(x.data, scratch.data, static_cast<size_t>(x.numel()), nccl_type(x.dtype),
                             group_->comms[static_cast<size_t>(rank_)], cuda->stream()),
               "all-gather on rank " + std::to_string(rank_));
    // Rank r's [rows, cols] block becomes columns [r · cols, (r + 1) · cols) of out.
    for (int r = 0; r < world; ++r) {
      const auto* src = static_cast<const char*>(scratch.data) + static_cast<size_t>(r) * x.nbytes();
      PAGODA_CUDA_CHECK(cudaMemcpy2DAsync(static_cast<char*>(out.data) + static_cast<size_t>(r * cols) * esz,
                                          static_cast<size_t>(out.stride0()) * esz, src, static_cast<size_t>(cols) * esz,
                                          static_cast<size_t>(cols) * esz, static_cast<size_t>(rows),
                                          cudaMemcpyDeviceToDevice, cuda->stream()));
    }
  }

  void all_reduce_add_rms_norm(Backend& be, Tensor& x, Tensor& residual, const Tensor& w, Tensor& out, float eps,
                               bool zero_centered) override {
    auto* cuda = dynamic_cast<CudaBackend*>(&unwrap_timed(be));
    if (cuda == nullptr || !group_->p2p || !cuda::p2p_norm_takes(*group_->p2p, x, residual, w, out)) {
      Communicator::all_reduce_add_rms_norm(be, x, residual, w, out, eps, zero_centered);
      return;
    }
    record_external_op(be, "all_reduce_add_rms_norm_p2p", std::to_string(x.row_numel()) + " " + dtype_name(x.dtype),
                       static_cast<double>(3 * x.nbytes()));
    cuda->activate();
    cuda::launch_p2p_all_reduce_add_rms_norm(*group_->p2p, rank_, x, residual, w, out, eps, zero_centered,
                                             cuda->stream());
  }

  void abort(const std::string&) override {
    std::call_once(group_->aborted, [&] {
      if (group_->p2p) group_->p2p->abort();
      for (ncclComm_t& c : group_->comms) {
        if (c != nullptr) ncclCommAbort(c);
        c = nullptr;
      }
    });
  }

 private:
  std::shared_ptr<NcclGroup> group_;
  int rank_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(int world, int first_ordinal,
                                                                   bool custom_all_reduce) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
  check(devices >= first_ordinal + world,
        "--tensor-parallel-size " + std::to_string(world) + " on --device cuda: the NCCL group needs CUDA devices " +
            std::to_string(first_ordinal) + ".." + std::to_string(first_ordinal + world - 1) + ", " +
            std::to_string(devices) + " are visible (CUDA_VISIBLE_DEVICES)");
  setenv("NCCL_NVLS_ENABLE", "0", 1);  // multicast off, whatever the environment says
  auto group = std::make_shared<NcclGroup>();
  group->comms.assign(static_cast<size_t>(world), nullptr);
  double timeout = 120;
  if (const char* t = std::getenv("PAGODA_NCCL_INIT_TIMEOUT")) timeout = std::atof(t);
  // ncclCommInitAll on a thread of its own: if the group never forms, the server says so and exits
  // instead of waiting (the thread is left behind; the process is about to end).
  auto done = std::make_shared<std::promise<ncclResult_t>>();
  std::future<ncclResult_t> result = done->get_future();
  std::thread([group, world, first_ordinal, done] {
    std::vector<int> ordinals(static_cast<size_t>(world));
    for (int i = 0; i < world; ++i) ordinals[static_cast<size_t>(i)] = first_ordinal + i;
    done->set_value(ncclCommInitAll(group->comms.data(), world, ordinals.data()));
  }).detach();
  if (result.wait_for(std::chrono::duration<double>(timeout)) != std::future_status::ready)
    throw Error("NCCL: the group of " + std::to_string(world) + " GPUs did not form within " +
                std::to_string(static_cast<int>(timeout)) + " s (PAGODA_NCCL_INIT_TIMEOUT); check the GPUs with "
                "nvidia-smi topo -m and NCCL_DEBUG=INFO");
  nccl_check(result.get(), "ncclCommInitAll over " + std::to_string(world) + " GPUs");
  if (custom_all_reduce) {
    std::vector<int> devices(static_cast<size_t>(world));
    for (int i = 0; i < world; ++i) devices[static_cast<size_t>(i)] = first_ordinal + i;
    group->p2p = cuda::make_p2p_group(devices, size_t{4} << 20);
    LOG_INFO(group->p2p ? "tensor parallelism: sums up to 4 MiB through peer memory, larger ones through NCCL"
                        : "tensor parallelism: the GPUs cannot reach each other's memory; every sum through NCCL");
  }
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < world; ++r) out.push_back(std::make_unique<NcclCommunicator>(group, r));
  return out;
}

#else

std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(int world, int, bool) {
  throw Error("--tensor-parallel-size " + std::to_string(world) + " on --device cuda: this pagoda was built "
              "without NCCL (libnccl was not found beside the CUDA toolkit); install NCCL and rebuild, or use "
              "--tensor-parallel-size 1");
}

#endif

}  // namespace pagoda
