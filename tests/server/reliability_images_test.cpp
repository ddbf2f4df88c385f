// Reliability against hostile images (docs/vision.md, docs/limits.md): truncated and corrupt files,
// bad base64, 100000 x 100000 declared dimensions, URLs the server may not read, more images than
// --limit-mm-per-prompt and thousands of image parts are each a 400 naming the part, within 2 s,
// with the server's peak memory growing less than 64 MiB, and the server answers after them.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
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

}  // namespace
}  // namespace pagoda::server::test
