#include "io/safetensors.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>

#include "core/dtype.h"
#include "io_test_util.h"

namespace pagoda {
namespace {

using io_test::build;
using io_test::bytes_of;
using io_test::error_of;
using io_test::image;
using io_test::TempDir;
using io_test::Tensor;
using io_test::contains;

std::unique_ptr<SafetensorsFile> open_image(const TempDir& dir, const std::string& bytes) {
  const std::string path = dir.file("t.safetensors");
  io_test::write_file(path, bytes);
  return SafetensorsFile::open(path);
}

std::string open_error(const std::string& bytes) {
  TempDir dir;
  return error_of([&] { open_image(dir, bytes); });
}

// A header for one tensor `w` with the given fields spelled out as JSON text.
std::string one_tensor(const std::string& dtype, const std::string& shape,
                       const std::string& offsets) {
  return R"({"w":{"dtype":")" + dtype + R"(","shape":)" + shape + R"(,"data_offsets":)" +
         offsets + "}}";
}

TEST(Safetensors, ReadsBackF32Bf16F16ValuesAndMetadata) {
  const std::vector<float> f32 = {1.5f, -2.25f, 3.0f, 1e-3f, -7.0f, 65504.0f};
  const std::vector<float> small = {0.5f, -1.0f, 2.75f, -0.125f};
  std::vector<uint16_t> bf16, f16;
  for (float x : small) {
    bf16.push_back(f32_to_bf16(x));
    f16.push_back(f32_to_f16(x));
  }
  TempDir dir;
  // Not in alphabetical order: tensors() must keep header order.
  auto file = open_image(dir, build({{"z.f32", "F32", {2, 3}, bytes_of(f32)},
                                     {"a.bf16", "BF16", {4}, bytes_of(bf16)},
                                     {"m.f16", "F16", {2, 2}, bytes_of(f16)}},
                                    {{"format", "pt"}}));
  ASSERT_EQ(file->tensors().size(), 3u);
  const TensorView& t0 = file->tensors()[0];
  EXPECT_EQ(t0.name, "z.f32");
  EXPECT_EQ(t0.dtype, DType::F32);
  EXPECT_EQ(t0.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t0.numel(), 6);
  ASSERT_EQ(t0.nbytes, 24u);
  for (size_t i = 0; i < f32.size(); ++i) {
    EXPECT_EQ(reinterpret_cast<const float*>(t0.data)[i], f32[i]);
  }
  const TensorView& t1 = file->tensors()[1];
  EXPECT_EQ(t1.name, "a.bf16");
  EXPECT_EQ(t1.dtype, DType::BF16);
  const TensorView& t2 = file->tensors()[2];
  EXPECT_EQ(t2.dtype, DType::F16);
  EXPECT_EQ(t2.shape, (std::vector<int64_t>{2, 2}));
  for (size_t i = 0; i < small.size(); ++i) {
    // These values are exact in bf16 and f16.
    EXPECT_EQ(bf16_to_f32(reinterpret_cast<const uint16_t*>(t1.data)[i]), small[i]);
    EXPECT_EQ(f16_to_f32(reinterpret_cast<const uint16_t*>(t2.data)[i]), small[i]);
  }
  EXPECT_EQ(file->metadata().at("format"), "pt");
  EXPECT_EQ(file->path(), dir.file("t.safetensors"));
}

// Quantized checkpoints: e4m3fn weights (one byte each) and int32 packed words, read as stored.
TEST(Safetensors, ReadsF8E4m3AndI32TensorsAsStored) {
  const std::vector<uint8_t> fp8 = {0x38, 0xb8, 0x7e, 0x01, 0x00, 0x80, 0x40, 0xc0};  // 1 -1 448 2^-9 0 -0 2 -2
  const std::vector<int32_t> words = {7, -1, 1 << 30};
  TempDir dir;
  auto file = open_image(dir, build({{"q", "F8_E4M3", {2, 4}, bytes_of(fp8)}, {"p", "I32", {3}, bytes_of(words)}}));
  ASSERT_EQ(file->tensors().size(), 2u);
  const TensorView& q = file->tensors()[0];
  EXPECT_EQ(q.dtype, DType::F8_E4M3);
  EXPECT_EQ(q.nbytes, 8u);
  EXPECT_EQ(fp8_e4m3_to_f32(q.data[2]), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(q.data[1]), -1.0f);
  const TensorView& p = file->tensors()[1];
  EXPECT_EQ(p.dtype, DType::I32);
  EXPECT_EQ(p.nbytes, 12u);
  EXPECT_EQ(reinterpret_cast<const int32_t*>(p.data)[2], 1 << 30);
}

// EAGLE-3 heads as published: d2t is I64 (read as stored), t2d a BOOL mask no model loads
// (checked, overlaps included, but not listed).
TEST(Safetensors, ReadsI64TensorsAndSkipsBoolOnes) {
  const std::vector<int64_t> d2t = {0, 5, int64_t{1} << 40};
  const std::vector<uint8_t> t2d = {1, 0, 1, 1, 0, 0, 0, 0};
  TempDir dir;
  auto file = open_image(dir, build({{"d2t", "I64", {3}, bytes_of(d2t)}, {"t2d", "BOOL", {8}, bytes_of(t2d)}}));
  ASSERT_EQ(file->tensors().size(), 1u);
  const TensorView& d = file->tensors()[0];
  EXPECT_EQ(d.name, "d2t");
  EXPECT_EQ(d.dtype, DType::I64);
  EXPECT_EQ(d.nbytes, 24u);
  EXPECT_EQ(reinterpret_cast<const int64_t*>(d.data)[2], int64_t{1} << 40);
  // A BOOL tensor is still checked: its size against its shape, its bytes against the others'.
  EXPECT_TRUE(contains(open_error(image(one_tensor("BOOL", "[3]", "[0, 4]"), std::string(8, '\0'))),
                       "needs 3"));
  const std::string overlapping = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                  R"("m":{"dtype":"BOOL","shape":[4],"data_offsets":[2,6]}})";
  EXPECT_TRUE(contains(open_error(image(overlapping, std::string(8, '\0'))), "overlap"));
}

TEST(Safetensors, AcceptsScalarsEmptyTensorsAndNoTensors) {
  TempDir dir;
  auto file = open_image(dir, build({{"s", "F32", {}, bytes_of(std::vector<float>{4.0f})},
                                     {"e", "BF16", {0, 5}, ""}}));
  ASSERT_EQ(file->tensors().size(), 2u);
  EXPECT_EQ(file->tensors()[0].numel(), 1);
  EXPECT_EQ(*reinterpret_cast<const float*>(file->tensors()[0].data), 4.0f);
  EXPECT_EQ(file->tensors()[1].numel(), 0);
  EXPECT_EQ(file->tensors()[1].nbytes, 0u);
  TempDir dir2;
  EXPECT_TRUE(open_image(dir2, image("{}", ""))->tensors().empty());
}

TEST(Safetensors, ParseWorksOnMemory) {
  const std::string bytes = build({{"w", "F32", {2}, bytes_of(std::vector<float>{1, 2})}});
  std::vector<uint64_t> aligned((bytes.size() + 7) / 8);
  std::memcpy(aligned.data(), bytes.data(), bytes.size());
  auto file = SafetensorsFile::parse(reinterpret_cast<const uint8_t*>(aligned.data()),
                                     bytes.size(), "memory");
  ASSERT_EQ(file->tensors().size(), 1u);
  EXPECT_EQ(reinterpret_cast<const float*>(file->tensors()[0].data)[1], 2.0f);
}

TEST(Safetensors, RejectsTruncatedFile) {
  EXPECT_TRUE(contains(open_error(std::string("\x10\0\0", 3)), "too short"));
  const std::string valid = build({{"w", "F32", {4}, std::string(16, '\0')}});
  // Cut inside the data section, then inside the header.
  EXPECT_TRUE(contains(open_error(valid.substr(0, valid.size() - 4)),
                       "outside the data section"));
  EXPECT_TRUE(contains(open_error(valid.substr(0, 20)), "exceeds the file size"));
}

TEST(Safetensors, RejectsHeaderLongerThanFile) {
  EXPECT_TRUE(contains(open_error(io_test::u64_le(1000) + "{}"), "exceeds the file size"));
}

TEST(Safetensors, RejectsHugeHeaderLength) {
  EXPECT_TRUE(contains(open_error(io_test::u64_le(uint64_t{1} << 63) + "{}"),
              "header length 9223372036854775808 exceeds"));
}

TEST(Safetensors, RejectsHeaderOverLimitEvenWhenFileIsLargeEnough) {
  TempDir dir;
  const std::string path = dir.file("big.safetensors");
  io_test::write_file(path, io_test::u64_le(150'000'000) + "{}");
  ASSERT_EQ(::truncate(path.c_str(), 200'000'000), 0);  // sparse: no disk used
  EXPECT_TRUE(contains(error_of([&] { SafetensorsFile::open(path); }), "100 MB limit"));
}

TEST(Safetensors, RejectsBadJson) {
  EXPECT_TRUE(contains(open_error(image(R"({"w": {"dtype": "F32",)", "")), "not valid JSON"));
  EXPECT_TRUE(contains(open_error(image("[1, 2]", "")), "not an object"));
}

TEST(Safetensors, RejectsOffsetsOutsideData) {
  EXPECT_TRUE(contains(open_error(image(one_tensor("F32", "[2]", "[0, 8]"), std::string(4, '\0'))),
              "outside the data section"));
  EXPECT_TRUE(contains(open_error(image(one_tensor("F32", "[0]", "[8, 4]"), std::string(8, '\0'))),
              "is after end"));
  EXPECT_TRUE(contains(open_error(image(one_tensor("F32", "[1]", "[0]"), std::string(4, '\0'))),
              "data_offsets is not [begin, end]"));
}

TEST(Safetensors, RejectsOverlappingTensors) {
  const std::string header =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  const std::string msg = open_error(image(header, std::string(12, '\0')));
  EXPECT_TRUE(contains(msg, "overlap"));
  EXPECT_TRUE(contains(msg, "'a'"));
  EXPECT_TRUE(contains(msg, "'b'"));
}

TEST(Safetensors, RejectsSizeThatDoesNotMatchShape) {
  const std::string msg =
      open_error(image(one_tensor("BF16", "[2, 3]", "[0, 8]"), std::string(8, '\0')));
  EXPECT_TRUE(contains(msg, "'w'"));
  EXPECT_TRUE(contains(msg, "span 8 bytes but shape x BF16 needs 12"));
}

TEST(Safetensors, RejectsBadShapes) {
  EXPECT_TRUE(contains(open_error(image(one_tensor("F32", "[2, -1]", "[0, 0]"), "")),
              "shape[1] is negative"));
  EXPECT_TRUE(contains(open_error(image(one_tensor("F32", "[1.5]", "[0, 0]"), "")),
              "shape[0] is not an integer"));
  EXPECT_TRUE(contains(open_error(image(one_tensor("F32", "3", "[0, 0]"), "")),
              "shape is not an array"));
  EXPECT_TRUE(contains(
      open_error(image(one_tensor("F32", "[4611686018427387904, 4611686018427387904]", "[0, 0]"),
                       "")),
      "shape overflows"));
  // Overflows int64 before the trailing zero makes the product 0.
  EXPECT_TRUE(contains(
      open_error(image(one_tensor("F32", "[4611686018427387904, 3, 0]", "[0, 0]"), "")),
      "shape overflows"));
}

TEST(Safetensors, RejectsUnsupportedDtypesNamingTensorAndDtype) {
  for (const char* dtype : {"I8", "U8", "I16", "F8_E5M2", "F64"}) {
    const std::string msg =
        open_error(image(one_tensor(dtype, "[1]", "[0, 8]"), std::string(8, '\0')));
    EXPECT_TRUE(contains(msg, std::string("tensor 'w' has dtype ") + dtype +
                               "; pagoda loads BF16, F16 and F32 (and F8_E4M3 / I32 / I64 for quantized weights "
                               "and index tables)"))
        << msg;
  }
  EXPECT_TRUE(contains(open_error(image(R"({"w":{"dtype":7,"shape":[],"data_offsets":[0,4]}})",
                               std::string(4, 0))),
              "dtype is not a string"));
}

TEST(Safetensors, RejectsDuplicateNames) {
  const std::string header =
      R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
      R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  EXPECT_TRUE(contains(open_error(image(header, std::string(8, '\0'))),
              "duplicate tensor name 'w'"));
}

TEST(Safetensors, RejectsMissingFieldsAndBadMetadata) {
  EXPECT_TRUE(contains(open_error(image(R"({"w":{"dtype":"F32","shape":[1]}})", std::string(4, 0))),
              "tensor 'w' has no data_offsets"));
  EXPECT_TRUE(contains(open_error(image(R"({"w":[1,2]})", "")), "tensor 'w' is not an object"));
  EXPECT_TRUE(contains(open_error(image(R"({"__metadata__":{"format":1}})", "")),
              "__metadata__ value for 'format' is not a string"));
}

TEST(Safetensors, RejectsMisalignedTensor) {
  EXPECT_TRUE(contains(open_error(image(one_tensor("F32", "[1]", "[2, 6]"), std::string(6, '\0'))),
              "not aligned"));
}

TEST(Safetensors, RejectsEmptyFileDirectoryAndMissingFile) {
  TempDir dir;
  io_test::write_file(dir.file("empty.safetensors"), "");
  EXPECT_TRUE(contains(error_of([&] { SafetensorsFile::open(dir.file("empty.safetensors")); }),
              "is empty"));
  ASSERT_EQ(::mkdir(dir.file("d.safetensors").c_str(), 0755), 0);
  EXPECT_TRUE(contains(error_of([&] { SafetensorsFile::open(dir.file("d.safetensors")); }),
              "is a directory"));
  const std::string missing = dir.file("missing.safetensors");
  EXPECT_TRUE(contains(error_of([&] { SafetensorsFile::open(missing); }), missing));
}

}  // namespace
}  // namespace pagoda
