// The OutputProcessor on its own: token ids fed as an EngineCore would, one per step, through the
// real Qwen3 tokenizer (tests/data). The expected texts are cut from the source text by the stop
// rules (vLLM's), not taken from pagoda's output.
#include <gtest/gtest.h>

#include <memory>

#include "core/error.h"
#include "engine/output_processor.h"
#include "core/build_paths.h"

namespace pagoda {
namespace {

const std::string kText = "The quick brown fox jumps over the lazy dog. END of story.";

class OutputProcessorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tok_ = Tokenizer::load_dir(std::string(PAGODA_SOURCE_DIR) + "/tests/data/qwen3-tokenizer").release();
  }
  static void TearDownTestSuite() { delete tok_; }

  struct Run {
    std::string text;                 // every new_text, concatenated
    std::vector<std::string> deltas;  // per step
    RequestOutput last;
    std::vector<int64_t> aborted;
    int outputs_after_finish = 0;
  };

  // Feeds kText's tokens one per step; the last one comes finished with reason length.
  static Run run(SamplingParams p, const std::string& text = kText) {
    OutputProcessor proc(tok_);
    proc.add_request(7, p);
    const std::vector<int32_t> ids = tok_->encode(text);
    Run r;
    bool finished = false;
    for (size_t i = 0; i < ids.size(); ++i) {
      std::vector<EngineCoreOutput> core(1);
      core[0].id = 7;
      core[0].new_token_ids = {ids[i]};
      core[0].samples.resize(1);
      core[0].samples[0].token = ids[i];
      core[0].num_output_tokens = static_cast<int32_t>(i + 1);
      if (i + 1 == ids.size()) {
        core[0].finished = true;
        core[0].finish_reason = FinishReason::Length;
      }
      OutputProcessor::Result res = proc.process(core);
      r.aborted.insert(r.aborted.end(), res.reqs_to_abort.begin(), res.reqs_to_abort.end());
      if (finished) r.outputs_after_finish += static_cast<int>(res.outputs.size());
      for (RequestOutput& o : res.outputs) {
        EXPECT_EQ(o.id, 7);
        EXPECT_EQ(o.new_token_ids, std::vector<int32_t>{ids[i]});
        EXPECT_EQ(o.samples.size(), 1u);
        r.text += o.new_text;
        r.deltas.push_back(o.new_text);
        finished |= o.finished;
        r.last = std::move(o);
      }
    }
    EXPECT_EQ(proc.num_requests(), 0u) << "a finished request is forgotten";
    return r;
  }

  static SamplingParams stops(std::vector<std::string> s, bool include = false) {
    SamplingParams p;
    p.stop = StopStrings(std::move(s));
    p.include_stop_str_in_output = include;
    return p;
  }

  static Tokenizer* tok_;
};

Tokenizer* OutputProcessorTest::tok_ = nullptr;

TEST_F(OutputProcessorTest, WithoutStopStringsTheTextIsTheDecodedTokens) {
  const Run r = run({});
  EXPECT_EQ(r.text, kText);
  EXPECT_TRUE(r.last.finished);
  EXPECT_EQ(r.last.finish_reason, FinishReason::Length);
  EXPECT_TRUE(r.aborted.empty());
}

TEST_F(OutputProcessorTest, AStopStringEndsTheTextBeforeItAndAbortsTheRequest) {
  const Run r = run(stops({"lazy dog"}));
  EXPECT_EQ(r.text, kText.substr(0, kText.find("lazy dog")));
  EXPECT_TRUE(r.last.finished);
  EXPECT_EQ(r.last.finish_reason, FinishReason::Stop);
  EXPECT_EQ(r.last.stop_string, "lazy dog");
  EXPECT_EQ(r.aborted, std::vector<int64_t>{7});
  EXPECT_EQ(r.outputs_after_finish, 0) << "the core's later outputs for it are dropped";
}

TEST_F(OutputProcessorTest, TextThatMayBeginAStopStringIsHeldBack) {
  // Every delta sent is a prefix of the final text: "lazy" (a prefix of "lazy dog") never went out.
  const Run r = run(stops({"lazy dog"}));
  std::string sent;
  for (const std::string& d : r.deltas) {
    sent += d;
    EXPECT_EQ(sent.find("lazy"), std::string::npos) << sent;
  }
}

TEST_F(OutputProcessorTest, IncludeStopStrInOutputSendsTheStopStringAndHoldsNothingBack) {
  const Run r = run(stops({"lazy dog"}, /*include=*/true));
  // The stop string spans two tokens (" lazy", " dog"): its start was sent before it completed.
  EXPECT_EQ(r.text, kText.substr(0, kText.find("lazy dog") + 8));
  EXPECT_EQ(r.last.finish_reason, FinishReason::Stop);
  EXPECT_EQ(r.aborted, std::vector<int64_t>{7});
  std::string sent;
  bool lazy_sent_early = false;
  for (size_t i = 0; i + 1 < r.deltas.size(); ++i) {
    sent += r.deltas[i];
    lazy_sent_early |= sent.find("lazy") != std::string::npos;
  }
  EXPECT_TRUE(lazy_sent_early) << "with include_stop_str_in_output nothing is held back";
}

TEST_F(OutputProcessorTest, TheEarliestStopStringWins) {
  const Run r = run(stops({"dog", "fox"}));
  EXPECT_EQ(r.text, kText.substr(0, kText.find("fox")));
  EXPECT_EQ(r.last.stop_string, "fox");
}

TEST_F(OutputProcessorTest, HeldBackTextIsSentWhenTheRequestFinishes) {
  // "story" may begin "story!" until the request ends with length.
  const Run r = run(stops({"story!"}));
  EXPECT_EQ(r.text, kText);
  EXPECT_EQ(r.last.finish_reason, FinishReason::Length);
  EXPECT_TRUE(r.last.stop_string.empty());
  EXPECT_NE(r.last.new_text.find("story"), std::string::npos) << "held back until the finish";
  EXPECT_TRUE(r.aborted.empty());
}

TEST_F(OutputProcessorTest, StopStringsNeedATokenizer) {
  OutputProcessor proc(nullptr);
  EXPECT_THROW(proc.validate(stops({"x"})), Error);
  EXPECT_NO_THROW(proc.validate({}));
  proc.add_request(1, {});
  std::vector<EngineCoreOutput> core(2);
  core[0].id = 1;
  core[0].new_token_ids = {5};
  core[1].id = 99;  // never added: dropped
  OutputProcessor::Result res = proc.process(core);
  ASSERT_EQ(res.outputs.size(), 1u);
  EXPECT_EQ(res.outputs[0].new_token_ids, std::vector<int32_t>{5});
  EXPECT_TRUE(res.outputs[0].new_text.empty());
}

}  // namespace
}  // namespace pagoda
