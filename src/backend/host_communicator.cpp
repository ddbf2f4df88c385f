// The CPU's communicator: the ranks are threads of one process, their tensors host memory. An
// all-reduce publishes each rank's buffer, each rank sums its own slice of the elements over all
// ranks (in rank order, so every rank gets the same bits) into a shared buffer, and each copies the
// whole sum back: two barriers, no copies beyond the one result.
#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "backend/backend.h"
#include "backend/host_communicator.h"
#include "backend/timed_backend.h"
#include "core/error.h"

namespace pagoda {
namespace {

struct HostGroup {
  explicit HostGroup(int w) : world(w), inputs(static_cast<size_t>(w)) {}

  // Waits until every rank has arrived (the last one runs `last` first, alone); throws once the
  // group is aborted.
  template <class F>
  void barrier(F&& last) {
    std::unique_lock lock(mu);
    if (!aborted.empty()) throw Error("tensor parallelism: " + aborted);
    const uint64_t gen = generation;
    if (++arrived == world) {
      last();
      arrived = 0;
      ++generation;
      cv.notify_all();
      return;
    }
    cv.wait(lock, [&] { return generation != gen || !aborted.empty(); });
    if (generation == gen) throw Error("tensor parallelism: " + aborted);
  }

  void abort(const std::string& why) {
    std::lock_guard lock(mu);
    if (aborted.empty()) aborted = why.empty() ? std::string("a rank failed") : why;
    cv.notify_all();
  }

  const int world;
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  uint64_t generation = 0;
  std::string aborted;
  std::vector<const Tensor*> inputs;  // each rank's buffer during an all-reduce
  std::vector<float> sum;             // the result, written a slice per rank
};

class HostCommunicator final : public Communicator {
 public:
  HostCommunicator(std::shared_ptr<HostGroup> group, int rank) : group_(std::move(group)), rank_(rank) {}
  int rank() const override { return rank_; }
  int world() const override { return group_->world; }
  void abort(const std::string& why) override { group_->abort(why); }

  void all_reduce_sum(Backend& be, Tensor& x) override {
    check(be.device() == Device::CPU && x.dtype == DType::F32,
          "the host communicator sums fp32 tensors in host memory, not " + std::string(dtype_name(x.dtype)));
    record_external_op(be, "all_reduce", std::to_string(x.row_numel()) + " f32", static_cast<double>(x.nbytes()));
    HostGroup& g = *group_;
    const int64_t rows = x.ndim == 0 ? 1 : x.shape[0], cols = x.ndim == 0 ? 1 : x.row_numel();
    const int64_t n = rows * cols;
    g.inputs[static_cast<size_t>(rank_)] = &x;
    // Grown by the last to arrive: every rank has copied the previous result out by then.
    g.barrier([&] {
      if (static_cast<int64_t>(g.sum.size()) < n) g.sum.resize(static_cast<size_t>(n));
    });
    for (int r = 0; r < g.world; ++r) {
      const Tensor& o = *g.inputs[static_cast<size_t>(r)];
      check(o.numel() == x.numel(), "tensor parallelism: ranks all-reduce tensors of different sizes");
    }
    // This rank's rows (whole rows: strided views keep their inner dimensions contiguous).
    const int64_t lo = rows * rank_ / g.world, hi = rows * (rank_ + 1) / g.world;
    for (int64_t i = lo; i < hi; ++i) {
      float* dst = g.sum.data() + i * cols;
      const float* first = static_cast<const float*>(g.inputs[0]->row(i));
      std::copy(first, first + cols, dst);
      for (int r = 1; r < g.world; ++r) {
        const float* src = static_cast<const float*>(g.inputs[static_cast<size_t>(r)]->row(i));
        for (int64_t c = 0; c < cols; ++c) dst[c] += src[c];
      }
    }
    g.barrier([] {});
    for (int64_t i = 0; i < rows; ++i) {
      const float* src = g.sum.data() + i * cols;
      std::copy(src, src + cols, static_cast<float*>(x.row(i)));
    }
    // No third barrier: the next collective's first barrier waits for every rank to have copied
    // out before anyone writes its input or the sum again.
  }

  void all_gather_cols(Backend& be, const Tensor& x, Tensor&, Tensor& out) override {
    check(be.device() == Device::CPU && x.dtype == DType::F32 && out.dtype == DType::F32,
          "the host communicator gathers fp32 tensors in host memory, not " + std::string(dtype_name(x.dtype)));
    record_external_op(be, "all_gather", std::to_string(x.row_numel()) + " f32", static_cast<double>(x.nbytes()));
    HostGroup& g = *group_;
    const int64_t rows = x.shape[0], cols = x.row_numel();
    check(out.ndim == 2 && out.shape[0] == rows && out.shape[1] == cols * g.world,
          "tensor parallelism: a gather of " + std::to_string(g.world) + " ranks' [" + std::to_string(rows) + ", " +
              std::to_string(cols) + "] into a tensor of another shape");
    g.inputs[static_cast<size_t>(rank_)] = &x;
    g.barrier([] {});
    for (int r = 0; r < g.world; ++r) {
      const Tensor& o = *g.inputs[static_cast<size_t>(r)];
      check(o.numel() == x.numel(), "tensor parallelism: ranks gather tensors of different sizes");
      for (int64_t i = 0; i < rows; ++i) {
        const float* src = static_cast<const float*>(o.row(i));
        std::copy(src, src + cols, static_cast<float*>(out.row(i)) + r * cols);
      }
    }
    g.barrier([] {});  // every rank has read every input before any rank writes its own again
  }

 private:
  std::shared_ptr<HostGroup> group_;
  int rank_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_host_communicators(int world) {
  auto group = std::make_shared<HostGroup>(world);
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < world; ++r) out.push_back(std::make_unique<HostCommunicator>(group, r));
  return out;
}

}  // namespace pagoda
