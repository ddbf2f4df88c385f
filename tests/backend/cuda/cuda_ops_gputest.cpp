// What the op table (tests/backend/op_table_test.cpp, which holds every op's CUDA-vs-CPU-vs-naive
// cases) does not cover: the CUDA backend's memory copies and dtype conversions.
#include <algorithm>
#include <numeric>

#include "gpu_test_util.h"

namespace pagoda::test {
namespace {

constexpr DType kBf = DType::BF16;
constexpr DType kF32 = DType::F32;

TEST(CudaOps, UploadConvertAndCopies) {
  Backends be;
  std::mt19937 rng(8);
  const auto x = random_vec(rng, 1000, -100.0f, 100.0f, kF32);
  for (DType dt : {kBf, DType::F16, kF32}) {
    auto d = upload(*be.gpu, x, dt, {10, 100});
    expect_close(download(*be.gpu, d.t), round_all(x, dt), 0, 0, std::string("upload_convert to ") + dtype_name(dt));
  }
  // bf16 host source → f32 device.
  std::vector<uint16_t> hb(x.size());
  for (size_t i = 0; i < x.size(); ++i) hb[i] = f32_to_bf16(x[i]);
  auto d = empty(*be.gpu, kF32, {1000});
  be.gpu->upload_convert(Tensor(hb.data(), kBf, Device::CPU, {1000}), d.t);
  expect_close(download(*be.gpu, d.t), round_all(x, kBf), 0, 0, "upload_convert bf16 → f32");
  auto e = empty(*be.gpu, kF32, {1000});
  be.gpu->copy_on_device(e.t.data, d.t.data, 4000);
  be.gpu->fill_zero(e.t.data, 400);
  auto want = round_all(x, kBf);
  std::fill_n(want.begin(), 100, 0.0f);
  expect_close(download(*be.gpu, e.t), want, 0, 0, "copy_on_device + fill_zero");
}

}  // namespace
}  // namespace pagoda::test
