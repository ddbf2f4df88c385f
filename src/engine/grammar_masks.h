// Structured-output masks of a step, computed by persistent worker threads while the forward pass
// runs (a mask for step t depends only on the tokens up to t). Each worker takes the next sequence
// of the step from a shared counter; the engine thread, when it comes to wait, takes the ones no
// worker has started, so it never waits for a worker that is not running. No thread is started
// per step.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace pagoda {

class Sequence;

class GrammarMaskWorkers {
 public:
  // num_workers < 0: one less than the hardware threads (at least 1, at most 8). 0: no worker, the
  // engine thread computes every mask in wait() (the CPU backend: its forward pass already keeps
  // every core busy, and a third runnable thread costs it more than the masks themselves).
  explicit GrammarMaskWorkers(int num_workers = -1);
  ~GrammarMaskWorkers();
  GrammarMaskWorkers(const GrammarMaskWorkers&) = delete;
  GrammarMaskWorkers& operator=(const GrammarMaskWorkers&) = delete;

  // Starts filling the grammar_mask of every row with a matcher; `rows` must stay alive and
  // unchanged until wait() returns.
  void start(const std::vector<Sequence*>& rows, int32_t max_model_len);
  // Computes what is left on this thread, then waits for the workers' rows.
  void wait();

 private:
  void worker_loop();
  void run_rows();

  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::vector<Sequence*>* rows_ = nullptr;
  int32_t max_model_len_ = 0;
  uint64_t generation_ = 0;   // guarded by mu_: bumped by start()
  int active_ = 0;            // guarded by mu_: workers inside run_rows()
  bool stop_ = false;         // guarded by mu_
  std::atomic<size_t> next_{0};
  std::mutex error_mu_;
  std::exception_ptr error_;
};

// One sequence's mask for its next token (the budget of tokens it may still sample steers it to
// a complete output); a grammar whose state space outgrows its bounds allows only EOS.
void fill_grammar_mask(Sequence& s, int32_t max_model_len);

}  // namespace pagoda
