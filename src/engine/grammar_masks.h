// Structured-output masks, off the engine thread on every backend. After a sequence's token is
// sampled (or when the sequence is added), a job on a mask worker advances its matcher over that
// token (making the matcher first, when the grammar starts now) and fills the mask of its next
// token. Until the job is done the matcher and the mask belong to the job, and the scheduler
// leaves the sequence out of any step that would sample it (Scheduler::set_sample_gate): a slow
// mask — a large grammar's first states can take seconds — delays its own sequence by whole
// steps and nobody else. Before scheduling, the engine waits up to kGrace for the jobs of the
// last step, so that the usual mask (a copy from the grammar's cache, or microseconds of work)
// costs no step; a job that has had its grace is not waited for again.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace pagoda {

class Sequence;

class GrammarMaskWorkers {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kGrace{10};

  struct Job {
    Sequence* seq = nullptr;
    bool make_matcher = false;  // the grammar starts here (no matcher yet)
    bool accept = false;        // advance the matcher over `token` first
    int32_t token = -1;
    int64_t tokens_left = 0;    // tokens the sequence may still sample, the next one included
  };

  // num_workers < 0: one less than the hardware threads (at least 1, at most 8).
  explicit GrammarMaskWorkers(int num_workers = -1);
  // Drops the queued jobs and waits for the running ones (their sequences must be alive).
  ~GrammarMaskWorkers();
  GrammarMaskWorkers(const GrammarMaskWorkers&) = delete;
  GrammarMaskWorkers& operator=(const GrammarMaskWorkers&) = delete;

  // Queues a job; `job.seq` must stay alive until pending(job.seq) is false. One job per sequence
  // at a time.
  void submit(const Job& job);
  // Whether a job of `seq` is queued or running.
  bool pending(const Sequence* seq) const;
  bool any_pending() const;
  // Runs the queued jobs that continue a grammar (not those that make its first mask) on this
  // thread, then waits until every job submitted less than `grace` ago is done, at most until
  // `grace` after its submission.
  void wait_recent(std::chrono::nanoseconds grace = kGrace);
  // Waits until some job finishes, at most `timeout` (a step with nothing else to run).
  void wait_any(std::chrono::milliseconds timeout);
  // Sequences whose job failed in a way only they can answer for (e.g. bad_alloc of a large
  // grammar's state), with what went wrong: the engine fails those requests.
  std::vector<std::pair<int64_t, std::string>> take_failures();

 private:
  void worker_loop();
  void run(const Job& job);

  std::vector<std::thread> threads_;
  mutable std::mutex mu_;
  std::condition_variable wake_;  // a job queued, or stop
  std::condition_variable done_;  // a job finished
  std::deque<Job> queue_;
  std::unordered_map<const Sequence*, Clock::time_point> pending_;  // submission times
  std::vector<std::pair<int64_t, std::string>> failures_;
  bool stop_ = false;
};

// One job's work, on the calling thread: advance, then fill s.grammar_mask. A grammar error (its
// state space past its budget) ends that sequence (the mask allows only EOS); anything else is
// thrown.
void run_grammar_job(const GrammarMaskWorkers::Job& job);

}  // namespace pagoda
