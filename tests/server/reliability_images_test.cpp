// Reliability against hostile images (docs/vision.md, docs/limits.md): truncated and corrupt files,
// bad base64, 100000 x 100000 declared dimensions, URLs the server may not read, more images than
// --limit-mm-per-prompt and thousands of image parts are each a 400 naming the part, within 2 s,
// with the server's peak memory growing less than 64 MiB, and the server answers after them.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "vision_server.h"

namespace pagoda::server::test {
namespace {

TEST(ReliabilityImages, HostileImagesAreRefusedFastWithMemoryBounded) {
  const VisionModelDir dir;
  ServerProcess s;
  ASSERT_TRUE(s.start(dir.path, {"--served-model-name", "vis", "--max-model-len", "256", "--limit-mm-per-prompt",
                                 "{\"image\": 4}"}))
      << s.log();
  auto chat = [&](const nlohmann::json& parts) {
    const nlohmann::json body = {{"model", "vis"}, {"max_tokens", 2}, {"messages", {{{"role", "user"}, {"content", parts}}}}};
    return s.request("POST", "/v1/chat/completions", body.dump(), {});
  };
  auto image = [](const std::string& url) { return nlohmann::json{{"type", "image_url"}, {"image_url", {{"url", url}}}}; };
  const std::string png = vision_test::fixture_dir() + "/images/a_64x96.png";
  // A good image first: the server answers it (and has its steady memory after).
  HttpResult ok = chat({{{"type", "text"}, {"text", "AB"}}, image(data_uri(png, "image/png"))});
  ASSERT_EQ(ok.status, 200) << ok.body;
  const int64_t rss_before = vm_kib(s.pid(), "VmRSS:");

  std::string bytes = read_file(png);
  // A PNG declaring 100000 x 100000 pixels (its IHDR rewritten, CRC fixed).
  std::string huge = bytes;
  auto put32 = [&](size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) huge[at + static_cast<size_t>(i)] = static_cast<char>((v >> (24 - 8 * i)) & 0xff);
  };
  put32(16, 100000);
  put32(20, 100000);
  put32(29, crc32_of(huge.substr(12, 17)));
  const std::vector<std::pair<std::string, nlohmann::json>> bad = {
      {"truncated", {image("data:image/png;base64," + base64_encode(bytes.substr(0, bytes.size() / 2)))}},
      {"not an image", {image("data:image/png;base64," + base64_encode(std::string(4096, 'x')))}},
      {"bad base64", {image("data:image/png;base64,@@@@")}},
      {"100000 x 100000 declared", {image("data:image/png;base64," + base64_encode(huge))}},
      {"a file:// URL without --allowed-local-media-path", {image("file://" + png)}},
      {"an http URL without --allowed-media-domains", {image("http://127.0.0.1:1/x.png")}},
      {"five images over a limit of four", nlohmann::json::array()},
      {"thousands of image parts", nlohmann::json::array()},
  };
  for (auto [what, parts] : bad) {
    SCOPED_TRACE(what);
    if (what == "five images over a limit of four")
      for (int i = 0; i < 5; ++i) parts.push_back(image(data_uri(png, "image/png")));
    if (what == "thousands of image parts")
      for (int i = 0; i < 3000; ++i) parts.push_back(image("data:image/png;base64,AAAA"));
    const auto t0 = std::chrono::steady_clock::now();
    const HttpResult r = chat(parts);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("messages[0].content"), std::string::npos) << "the error names the part: " << r.body;
    EXPECT_LT(secs, 2.0);
  }
  const int64_t peak_growth_mib = (vm_kib(s.pid(), "VmHWM:") - rss_before) / 1024;
  EXPECT_LT(peak_growth_mib, 64) << "the server's peak memory grew by " << peak_growth_mib << " MiB";
  // Still serving.
  ok = chat({{{"type", "text"}, {"text", "AB"}}, image(data_uri(png, "image/png"))});
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(s.stop(), 0) << s.log();
}

TEST(ReliabilityImages, TheImageLimitsAreFlags) {
  const VisionModelDir dir;
  ServerProcess s;
  ASSERT_TRUE(s.start(dir.path, {"--served-model-name", "vis", "--max-model-len", "256", "--max-image-pixels", "4096",
                                 "--max-image-bytes", "8192"}))
      << s.log();
  auto chat = [&](const std::string& file, const std::string& type) {
    const nlohmann::json parts = {{{"type", "image_url"}, {"image_url", {{"url", data_uri(file, type)}}}}};
    const nlohmann::json body = {{"model", "vis"}, {"max_tokens", 2}, {"messages", {{{"role", "user"}, {"content", parts}}}}};
    return s.request("POST", "/v1/chat/completions", body.dump(), {});
  };
  const std::string images = vision_test::fixture_dir() + "/images/";
  HttpResult r = chat(images + "a_64x96.png", "image/png");  // 6,144 pixels, 16,831 bytes
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("8192"), std::string::npos) << "names the byte limit: " << r.body;
  r = chat(images + "b_50x75.jpg", "image/jpeg");  // 3,750 pixels, 3,318 bytes: within both
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(s.stop(), 0) << s.log();
  ServerProcess p;
  ASSERT_TRUE(p.start(dir.path, {"--served-model-name", "vis", "--max-model-len", "256", "--max-image-pixels", "3000"}))
      << p.log();
  const nlohmann::json parts = {{{"type", "image_url"}, {"image_url", {{"url", data_uri(images + "b_50x75.jpg", "image/jpeg")}}}}};
  r = p.request("POST", "/v1/chat/completions",
                nlohmann::json{{"model", "vis"}, {"max_tokens", 2}, {"messages", {{{"role", "user"}, {"content", parts}}}}}.dump(), {});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("3000"), std::string::npos) << "names the pixel limit: " << r.body;
  EXPECT_EQ(p.stop(), 0) << p.log();
}

// http(s) image URLs: fetched from an allowed host (the same answer as the image sent inline), never
// through a redirect, within 5 s and the byte limit; other hosts are refused unread.
TEST(ReliabilityImages, HttpImageUrlsOnlyFromAllowedHostsBoundedInTimeAndBytes) {
  const std::string images = vision_test::fixture_dir() + "/images";
  FILE* media = popen(("echo $$; exec python3 " + source_path("tests/server/media_server.py") + " " + images).c_str(), "r");
  ASSERT_NE(media, nullptr);
  char line[64] = {};
  ASSERT_NE(fgets(line, sizeof line, media), nullptr);
  const int media_pid = std::atoi(line);
  ASSERT_NE(fgets(line, sizeof line, media), nullptr);
  const std::string base = "http://127.0.0.1:" + std::to_string(std::atoi(line));

  const VisionModelDir dir;
  ServerProcess s;
  ASSERT_TRUE(s.start(dir.path, {"--served-model-name", "vis", "--max-model-len", "256", "--allowed-media-domains",
                                 "127.0.0.1", "--max-image-bytes", "1048576"}))
      << s.log();
  auto chat = [&](const std::string& url) {
    const nlohmann::json parts = {{{"type", "text"}, {"text", "AB"}}, {{"type", "image_url"}, {"image_url", {{"url", url}}}}};
    const nlohmann::json body = {{"model", "vis"}, {"max_tokens", 4}, {"temperature", 0}, {"ignore_eos", true},
                                 {"return_token_ids", true}, {"messages", {{{"role", "user"}, {"content", parts}}}}};
    const auto t0 = std::chrono::steady_clock::now();
    HttpResult r = s.request("POST", "/v1/chat/completions", body.dump(), {});
    return std::make_pair(r, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  };
  const auto [inline_r, t_inline] = chat(data_uri(images + "/a_64x96.png", "image/png"));
  const auto [fetched, t_fetched] = chat(base + "/a_64x96.png");
  ASSERT_EQ(inline_r.status, 200) << inline_r.body;
  ASSERT_EQ(fetched.status, 200) << fetched.body;
  EXPECT_EQ(nlohmann::json::parse(fetched.body)["choices"][0]["token_ids"],
            nlohmann::json::parse(inline_r.body)["choices"][0]["token_ids"]);
  for (const auto& [what, url, most_s] : std::vector<std::tuple<std::string, std::string, double>>{
           {"a redirect", base + "/redirect", 2.0},
           {"a host not allowed", "http://localhost:1/a.png", 2.0},
           {"a missing file", base + "/none.png", 2.0},
           {"more bytes than the limit", base + "/big", 5.0},
           {"a server that stalls", base + "/slow", 8.0}}) {
    SCOPED_TRACE(what);
    const auto [r, secs] = chat(url);
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_LT(secs, most_s);
  }
  EXPECT_EQ(s.stop(), 0) << s.log();
  kill(media_pid, SIGTERM);
  pclose(media);
}

}  // namespace
}  // namespace pagoda::server::test
