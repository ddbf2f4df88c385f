// Image decoding: the fixture images decode to the RGB bytes PIL produced (their SHA-256 is in
// reference.json), and hostile inputs (truncated, garbage, over-limit headers, decompression bombs,
// bad data URIs) fail fast with a pagoda::Error and bounded memory.
#include "media/image_decode.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/build_paths.h"
#include "media_test_util.h"
#include "core/error.h"

namespace pagoda {
namespace {

using media_test::fixture_dir;
using media_test::read_bytes;

std::string sha256_hex(const std::vector<uint8_t>& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr);
  std::string hex;
  char buf[3];
  for (unsigned i = 0; i < len; ++i) {
    std::snprintf(buf, sizeof buf, "%02x", digest[i]);
    hex += buf;
  }
  return hex;
}

nlohmann::json reference_images() {
  std::ifstream f(fixture_dir() + "/reference.json");
  return nlohmann::json::parse(f)["images"];
}

// The message of the pagoda::Error that `fn` throws ("" when it throws none: the test fails).
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a pagoda::Error";
  return "";
}

// Peak resident memory of this process: VmHWM, after resetting it where the kernel allows.
int64_t status_kib(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) return std::stoll(line.substr(std::strlen(key)));
  return -1;
}
struct PeakMemory {
  int64_t start_rss_kib;
  PeakMemory() {
    std::ofstream("/proc/self/clear_refs") << "5";  // resets VmHWM to the current RSS
    start_rss_kib = status_kib("VmRSS:");
  }
  int64_t growth_mib() const { return (status_kib("VmHWM:") - start_rss_kib) / 1024; }
};

void put_be32(std::vector<uint8_t>& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(uint8_t(v >> s));
}
void put_le32(std::vector<uint8_t>& out, uint32_t v) {
  for (int s = 0; s <= 24; s += 8) out.push_back(uint8_t(v >> s));
}

void put_png_chunk(std::vector<uint8_t>& out, const char* type, const std::vector<uint8_t>& data) {
  put_be32(out, uint32_t(data.size()));
  const size_t start = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), data.begin(), data.end());
  put_be32(out, uint32_t(crc32(0, out.data() + start, uInt(out.size() - start))));
}

// A PNG of 8-bit RGB declaring width x height whose IDAT inflates to `inflated_bytes` zeros
// (deflated in pieces, so the test never holds them).
std::vector<uint8_t> png_of_zeros(uint32_t width, uint32_t height, uint64_t inflated_bytes) {
  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  std::vector<uint8_t> ihdr;
  put_be32(ihdr, width);
  put_be32(ihdr, height);
  ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});  // depth 8, RGB, deflate, no filter, no interlace
  put_png_chunk(png, "IHDR", ihdr);
  z_stream z{};
  deflateInit(&z, 9);
  std::vector<uint8_t> zeros(1 << 20, 0), idat, buf(1 << 16);
  uint64_t left = inflated_bytes;
  int flush = Z_NO_FLUSH;
  do {
    const size_t n = size_t(std::min<uint64_t>(left, zeros.size()));
    left -= n;
    flush = left == 0 ? Z_FINISH : Z_NO_FLUSH;
    z.next_in = zeros.data();
    z.avail_in = uInt(n);
    do {
      z.next_out = buf.data();
      z.avail_out = uInt(buf.size());
      deflate(&z, flush);
      idat.insert(idat.end(), buf.data(), buf.data() + (buf.size() - z.avail_out));
    } while (z.avail_out == 0);
  } while (flush != Z_FINISH);
  deflateEnd(&z);
  put_png_chunk(png, "IDAT", idat);
  put_png_chunk(png, "IEND", {});
  return png;
}

std::string base64_of(const std::vector<uint8_t>& data) {
  static const char* kTable = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < data.size(); i += 3) {
    uint32_t v = uint32_t(data[i]) << 16;
    if (i + 1 < data.size()) v |= uint32_t(data[i + 1]) << 8;
    if (i + 2 < data.size()) v |= data[i + 2];
    out += kTable[(v >> 18) & 63];
    out += kTable[(v >> 12) & 63];
    out += i + 1 < data.size() ? kTable[(v >> 6) & 63] : '=';
    out += i + 2 < data.size() ? kTable[v & 63] : '=';
  }
  return out;
}

TEST(ImageDecode, PeakMemoryHelperSeesAnAllocation) {
  // The bomb tests' bound means something only if the measurement sees growth: 96 MiB touched.
  PeakMemory peak;
  std::vector<uint8_t> block(96 << 20, 1);
  EXPECT_GE(peak.growth_mib() + block[12345], 64);
}

TEST(ImageDecode, FixtureImagesMatchPilRgbBytes) {
  for (const auto& ref : reference_images()) {
    const std::string name = ref["file"];
    SCOPED_TRACE(name);
    const auto bytes = read_bytes(fixture_dir() + "/images/" + name);
    // rgb_sha256 is of PIL's convert("RGB"): for the RGBA image, alpha dropped.
    const RgbImage image = decode_image(bytes, {.alpha = AlphaMode::kDrop});
    EXPECT_EQ(image.width, ref["width"].get<int>());
    EXPECT_EQ(image.height, ref["height"].get<int>());
    EXPECT_EQ(sha256_hex(image.rgb), ref["rgb_sha256"].get<std::string>());
    const ImageSize size = read_image_size(bytes);
    EXPECT_EQ(size.width, image.width);
    EXPECT_EQ(size.height, image.height);
  }
}

TEST(ImageDecode, SniffsByMagicBytesNotName) {
  EXPECT_EQ(sniff_image_format(read_bytes(fixture_dir() + "/images/a_64x96.png")),
            ImageFormat::kPng);
  EXPECT_EQ(sniff_image_format(read_bytes(fixture_dir() + "/images/b_50x75.jpg")),
            ImageFormat::kJpeg);
  EXPECT_EQ(sniff_image_format(read_bytes(fixture_dir() + "/images/c_200x300.webp")),
            ImageFormat::kWebp);
  const std::vector<uint8_t> riff_not_webp = {'R', 'I', 'F', 'F', 0, 0, 0, 0, 'W', 'A', 'V', 'E'};
  EXPECT_EQ(sniff_image_format(riff_not_webp), ImageFormat::kUnknown);
}

TEST(ImageDecode, CompositesOverWhiteWithPillowsIntegerFormula) {
  // Values worked from AlphaComposite.c with dst = white: coef1 = a*128, coef2 = (255-a)*128,
  // out = SHIFTFORDIV255(src*coef1 + 255*coef2 + 0x4000) >> 7.
  struct Case {
    uint8_t in[4];
    uint8_t out[3];
  };
  const Case cases[] = {
      {{10, 20, 30, 0}, {255, 255, 255}},  // transparent: the background
      {{10, 20, 30, 255}, {10, 20, 30}},   // opaque: the colour
      // a = 128: 0*16384 + 255*127*128 + 16384 = 4161664; (4161664>>8 + 4161664)>>8 = 16320; >>7 =
      // 127
      {{0, 0, 0, 128}, {127, 127, 127}},
      // a = 1, src 0: 255*254*128 + 16384 = 8306944 -> (32449 + 8306944) >> 8 = 32575 -> >>7 = 254
      {{0, 0, 0, 1}, {254, 254, 254}},
      // a = 200, src 100: 100*25600 + 255*55*128 + 16384 = 4371584 -> (17076 + 4371584)>>8 = 17143
      // -> >>7 = 133 (the float formula 100*200/255 + 255*55/255 = 133.4)
      {{100, 100, 100, 200}, {133, 133, 133}},
  };
  for (const Case& c : cases) {
    uint8_t in[4] = {c.in[0], c.in[1], c.in[2], c.in[3]}, out[3] = {};
    composite_over_white(in, out);
    EXPECT_EQ(out[0], c.out[0]) << int(c.in[3]);
    EXPECT_EQ(out[1], c.out[1]) << int(c.in[3]);
    EXPECT_EQ(out[2], c.out[2]) << int(c.in[3]);
  }
}

TEST(ImageDecode, RgbaFixtureCompositedDiffersOnlyWhereTransparent) {
  const auto bytes = read_bytes(fixture_dir() + "/images/d_40x130_rgba.png");
  const RgbImage dropped = decode_image(bytes, {.alpha = AlphaMode::kDrop});
  const RgbImage composited = decode_image(bytes, {.alpha = AlphaMode::kCompositeOverWhite});
  ASSERT_EQ(dropped.rgb.size(), composited.rgb.size());
  int changed = 0;
  for (size_t i = 0; i < dropped.rgb.size(); ++i) changed += dropped.rgb[i] != composited.rgb[i];
  EXPECT_GT(changed, 0) << "the RGBA fixture has translucent pixels, compositing must change some";
}

TEST(ImageDecode, TruncatedFilesAreErrors) {
  for (const char* name : {"a_64x96.png", "b_50x75.jpg", "c_200x300.webp", "d_40x130_rgba.png"}) {
    SCOPED_TRACE(name);
    auto bytes = read_bytes(fixture_dir() + "/images/" + name);
    bytes.resize(bytes.size() / 2);
    const std::string message = error_of([&] { decode_image(bytes); });
    EXPECT_NE(message.find("truncated"), std::string::npos) << message;
  }
  auto png = read_bytes(fixture_dir() + "/images/a_64x96.png");
  png.resize(30);  // inside IHDR
  EXPECT_FALSE(error_of([&] { decode_image(png); }).empty());
}

TEST(ImageDecode, GarbageAndEmptyInputsAreErrors) {
  std::mt19937 rng(1234);
  std::vector<uint8_t> garbage(4096);
  for (auto& b : garbage) b = uint8_t(rng());
  EXPECT_NE(error_of([&] { decode_image(garbage); }).find("not PNG, JPEG or WebP"),
            std::string::npos);
  EXPECT_NE(error_of([&] { decode_image({}); }).find("empty"), std::string::npos);
  // The right magic, garbage after it: each library's error comes back as an Error.
  for (std::vector<uint8_t> magic :
       {std::vector<uint8_t>{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'},
        std::vector<uint8_t>{0xFF, 0xD8, 0xFF},
        std::vector<uint8_t>{'R', 'I', 'F', 'F', 0xff, 0xff, 0, 0, 'W', 'E', 'B', 'P'}}) {
    std::vector<uint8_t> bytes = magic;
    bytes.insert(bytes.end(), garbage.begin(), garbage.end());
    EXPECT_FALSE(error_of([&] { decode_image(bytes); }).empty());
  }
  // Flipped bytes in the middle of the pixel data of each fixture: an Error or an image, no crash.
  for (const char* name : {"a_64x96.png", "b_50x75.jpg", "c_200x300.webp"}) {
    auto bytes = read_bytes(fixture_dir() + "/images/" + name);
    for (size_t i = bytes.size() / 2; i < bytes.size() / 2 + 64 && i < bytes.size(); ++i)
      bytes[i] ^= 0x5a;
    try {
      const RgbImage image = decode_image(bytes);
      EXPECT_EQ(image.rgb.size(), size_t(image.width) * image.height * 3);
    } catch (const Error&) {
    }
  }
}

TEST(ImageDecode, PngHeaderDeclaringHugeSizeIsRefusedBeforeAllocating) {
  // A valid IHDR (correct CRC) declaring 100000 x 100000 and a tiny IDAT.
  std::vector<uint8_t> png = png_of_zeros(100000, 100000, 1000);
  PeakMemory peak;
  const std::string message = error_of([&] { decode_image(png); });
  EXPECT_NE(message.find("100000x100000"), std::string::npos) << message;
  EXPECT_NE(message.find("limit"), std::string::npos) << message;
  EXPECT_NE(error_of([&] { read_image_size(png); }).find("100000x100000"), std::string::npos);
  EXPECT_LT(peak.growth_mib(), 64);
}

TEST(ImageDecode, JpegFrameHeaderDeclaringHugeSizeIsRefused) {
  auto jpeg = read_bytes(fixture_dir() + "/images/b_50x75.jpg");
  // Rewrite the SOFn segment's height and width (bytes 5..8 after the marker) to 65000 x 65000.
  bool patched = false;
  for (size_t p = 2; p + 9 < jpeg.size(); ++p) {
    if (jpeg[p] == 0xFF && (jpeg[p + 1] == 0xC0 || jpeg[p + 1] == 0xC2)) {
      jpeg[p + 5] = jpeg[p + 7] = 65000 >> 8;
      jpeg[p + 6] = jpeg[p + 8] = 65000 & 0xff;
      patched = true;
      break;
    }
  }
  ASSERT_TRUE(patched);
  PeakMemory peak;
  const std::string message = error_of([&] { decode_image(jpeg); });
  EXPECT_NE(message.find("65000x65000"), std::string::npos) << message;
  EXPECT_NE(error_of([&] { read_image_size(jpeg); }).find("65000x65000"), std::string::npos);
  EXPECT_LT(peak.growth_mib(), 64);
}

TEST(ImageDecode, WebpDeclaringHugeCanvasIsRefused) {
  // A lossless (VP8L) header declaring 16384 x 16384: inside the side limit, 16x the pixel limit.
  std::vector<uint8_t> vp8l = {0x2f};
  const uint32_t bits = (16384 - 1) | ((16384 - 1) << 14);  // 14 bits each, no alpha, version 0
  put_le32(vp8l, bits);
  vp8l.resize(64, 0);
  std::vector<uint8_t> webp = {'R', 'I', 'F', 'F'};
  put_le32(webp, uint32_t(4 + 8 + vp8l.size()));
  webp.insert(webp.end(), {'W', 'E', 'B', 'P', 'V', 'P', '8', 'L'});
  put_le32(webp, uint32_t(vp8l.size()));
  webp.insert(webp.end(), vp8l.begin(), vp8l.end());
  PeakMemory peak;
  const std::string message = error_of([&] { decode_image(webp); });
  EXPECT_NE(message.find("16384x16384"), std::string::npos) << message;
  EXPECT_NE(message.find("limit"), std::string::npos) << message;
  EXPECT_LT(peak.growth_mib(), 64);
}

TEST(ImageDecode, PngBombOverThePixelLimitIsRefusedBeforeInflating) {
  // 6000 x 6000 RGB: 108 MB of rows deflated into ~100 KB; the limit here is 4M pixels.
  const std::vector<uint8_t> png = png_of_zeros(6000, 6000, uint64_t{6000} * (1 + 6000 * 3));
  ASSERT_LT(png.size(), 1u << 20);
  DecodeOptions options;
  options.limits.max_pixels = 4 << 20;
  PeakMemory peak;
  const auto start = std::chrono::steady_clock::now();
  const std::string message = error_of([&] { decode_image(png, options); });
  EXPECT_NE(message.find("6000x6000"), std::string::npos) << message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_LT(peak.growth_mib(), 64);
}

TEST(ImageDecode, PngBombWithFarMoreImageDataThanItsSizeIsRefused) {
  // 64 x 64 declared (12 KB of rows) but the IDAT inflates to 128 MB.
  const std::vector<uint8_t> png = png_of_zeros(64, 64, uint64_t{128} << 20);
  PeakMemory peak;
  const auto start = std::chrono::steady_clock::now();
  const std::string message = error_of([&] { decode_image(png); });
  EXPECT_NE(message.find("decompression bomb"), std::string::npos) << message;
  // Refused after inflating about what 64 x 64 needs, not the 128 MB (about 0.35 s).
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(100));
  EXPECT_LT(peak.growth_mib(), 64);
}

TEST(ImageDecode, PngWithExactlyItsImageDataDecodes) {
  // The bomb check's arithmetic of the rows' size, on a valid image: 64 x 64 RGB of zeros.
  const RgbImage image = decode_image(png_of_zeros(64, 64, 64 * (1 + 64 * 3)));
  EXPECT_EQ(image.width, 64);
  EXPECT_EQ(image.rgb, std::vector<uint8_t>(64 * 64 * 3, 0));
  // One byte short of the rows: truncated image data, an Error.
  EXPECT_FALSE(
      error_of([&] { decode_image(png_of_zeros(64, 64, 64 * (1 + 64 * 3) - 1)); }).empty());
}

TEST(ImageDecode, OverMaxBytesIsRefused) {
  const auto bytes = read_bytes(fixture_dir() + "/images/c_200x300.webp");
  DecodeOptions options;
  options.limits.max_bytes = bytes.size() - 1;
  const std::string message = error_of([&] { decode_image(bytes, options); });
  EXPECT_NE(message.find("limit is " + std::to_string(bytes.size() - 1) + " bytes"),
            std::string::npos)
      << message;
}

TEST(ImageDecode, DataUriDecodesLikeTheFile) {
  const auto bytes = read_bytes(fixture_dir() + "/images/a_64x96.png");
  const RgbImage from_file = decode_image(bytes);
  for (const char* type : {"image/png", "image/jpeg", "image/jpg", "image/webp"}) {
    // The media type only has to be an image type: the bytes say which format.
    const RgbImage from_uri =
        decode_data_uri(std::string("data:") + type + ";base64," + base64_of(bytes));
    EXPECT_EQ(from_uri.rgb, from_file.rgb) << type;
  }
  std::string unpadded = base64_of(bytes);
  while (unpadded.back() == '=') unpadded.pop_back();
  EXPECT_EQ(decode_data_uri("data:image/png;base64," + unpadded).rgb, from_file.rgb);
}

TEST(ImageDecode, BadDataUrisAreErrors) {
  const auto bytes = read_bytes(fixture_dir() + "/images/a_64x96.png");
  const std::string b64 = base64_of(bytes);
  EXPECT_NE(error_of([&] {
              decode_data_uri("data:image/png;base64,iVBO@@@=");
            }).find("invalid character"),
            std::string::npos);
  EXPECT_NE(error_of([&] { decode_data_uri("data:text/plain;base64," + b64); }).find("media type"),
            std::string::npos);
  EXPECT_NE(error_of([&] { decode_data_uri("data:image/gif;base64," + b64); }).find("media type"),
            std::string::npos);
  EXPECT_NE(error_of([&] { decode_data_uri("data:image/png," + b64); }).find("base64"),
            std::string::npos);
  EXPECT_NE(error_of([&] { decode_data_uri("https://example.com/a.png"); }).find("data:"),
            std::string::npos);
  EXPECT_NE(error_of([&] { decode_data_uri("data:image/png;base64,AAAAA"); }).find("length"),
            std::string::npos);
  DecodeOptions small;
  small.limits.max_bytes = 1000;
  ASSERT_GT(bytes.size(), 1000u);
  // Refused from the length alone: a 100 MiB URI is not decoded.
  const std::string huge = "data:image/png;base64," + std::string(100 << 20, 'A');
  PeakMemory peak;
  EXPECT_NE(error_of([&] { decode_data_uri(huge); }).find("limit"), std::string::npos);
  EXPECT_NE(error_of([&] {
              decode_data_uri("data:image/png;base64," + b64, small);
            }).find("limit is 1000"),
            std::string::npos);
  EXPECT_LT(peak.growth_mib(), 64);
}

}  // namespace
}  // namespace pagoda
