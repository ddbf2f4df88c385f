// libFuzzer target: SafetensorsFile::parse must reject any malformed image with pagoda::Error and
// never read outside it. Reading every tensor byte lets ASan catch a view that escapes the buffer.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // libFuzzer's buffer is heap-allocated; copy into 8-aligned storage so alignment checks see
  // the same layout as an mmap'd file.
  std::vector<uint64_t> aligned((size + 7) / 8);
  if (size > 0) __builtin_memcpy(aligned.data(), data, size);
  try {
    auto file = pagoda::SafetensorsFile::parse(reinterpret_cast<const uint8_t*>(aligned.data()),
                                               size, "fuzz");
    unsigned sum = 0;
    for (const pagoda::TensorView& t : file->tensors()) {
      for (size_t i = 0; i < t.nbytes; ++i) sum += t.data[i];
      sum += static_cast<unsigned>(t.numel());
    }
    volatile unsigned sink = sum;
    (void)sink;
  } catch (const pagoda::Error&) {
  }
  return 0;
}
