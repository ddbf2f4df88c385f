// "Did you mean": the edit distance against hand-counted edits, and which names are suggested.
#include <gtest/gtest.h>

#include "cli/suggest.h"

namespace pagoda::cli {
namespace {

TEST(CliSuggest, EditDistance) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("serve", "serve"), 0u);
  EXPECT_EQ(edit_distance("serv", "serve"), 1u);       // one insertion
  EXPECT_EQ(edit_distance("servee", "serve"), 1u);     // one deletion
  EXPECT_EQ(edit_distance("sarve", "serve"), 1u);      // one substitution
  EXPECT_EQ(edit_distance("sevre", "serve"), 1u);      // one swap of neighbours
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);   // k->s, e->i, +g
  EXPECT_EQ(edit_distance("ca", "abc"), 3u);           // optimal string alignment: no edit of a swapped pair
  EXPECT_EQ(edit_distance("info", "serve"), 5u);
}

TEST(CliSuggest, DidYouMean) {
  const std::vector<std::string> names{"info", "tokenize", "generate", "bench", "perplexity", "serve"};
  EXPECT_EQ(did_you_mean("serv", names), std::vector<std::string>{"serve"});
  EXPECT_EQ(did_you_mean("genrate", names), std::vector<std::string>{"generate"});
  EXPECT_EQ(did_you_mean("tokenise", names), std::vector<std::string>{"tokenize"});
  EXPECT_EQ(did_you_mean("bnech", names), std::vector<std::string>{"bench"});
  EXPECT_EQ(did_you_mean("inf", names), std::vector<std::string>{"info"});
  EXPECT_EQ(did_you_mean("perp", names), std::vector<std::string>{"perplexity"});  // a beginning
  EXPECT_TRUE(did_you_mean("xyzzy", names).empty());
  EXPECT_TRUE(did_you_mean("i", names).empty());  // one letter begins too much to guess
  // Closest first: an edit away before a mere beginning.
  EXPECT_EQ(did_you_mean("serv", {"servers", "serve"}), (std::vector<std::string>{"serve", "servers"}));
}

}  // namespace
}  // namespace pagoda::cli
