// config.json's quantization_config (io/quantization.h): the 4-bit formats read as their writers
// (AutoAWQ, GPTQ, llm-compressor) write them, FP8 still read, and what pagoda cannot load refused
// by name with what to do.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/quantization.h"

namespace pagoda {
namespace {

using json = nlohmann::json;
using Layout = WeightQuantization::Int4Layout;

WeightQuantization read(const json& qc) { return read_quantization_config(json{{"quantization_config", qc}}); }

std::string refusal(const json& qc) {
  try {
    read(qc);
  } catch (const Error& e) {
    return e.what();
  }
  return "(accepted)";
}

json w4a16(bool symmetric, const std::string& strategy = "group") {
  return {{"quant_method", "compressed-tensors"},
          {"format", "pack-quantized"},
          {"config_groups",
           {{"group_0",
             {{"targets", {"Linear"}},
              {"weights",
               {{"num_bits", 4}, {"type", "int"}, {"strategy", strategy}, {"group_size", 128}, {"symmetric", symmetric}}}}}}},
          {"ignore", {"lm_head"}}};
}

TEST(QuantizationConfig, FourBitFormatsReadAsTheirWritersWriteThem) {
  const WeightQuantization awq =
      read({{"quant_method", "awq"}, {"bits", 4}, {"group_size", 128}, {"zero_point", true}, {"version", "gemm"},
            {"modules_to_not_convert", nullptr}});
  EXPECT_TRUE(awq.int4());
  EXPECT_EQ(awq.int4_layout, Layout::Awq);
  EXPECT_EQ(awq.group_size, 128);
  EXPECT_NE(awq.describe().find("int4"), std::string::npos) << awq.describe();

  const WeightQuantization gptq = read({{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 32}, {"desc_act", false},
                                        {"sym", true}, {"checkpoint_format", "gptq"}});
  EXPECT_EQ(gptq.int4_layout, Layout::Gptq);
  EXPECT_EQ(gptq.group_size, 32);
  EXPECT_EQ(gptq.gptq_zero_offset, 1) << "v1 checkpoints store zero - 1";
  EXPECT_EQ(read({{"quant_method", "gptq"}, {"bits", 4}, {"group_size", -1}, {"checkpoint_format", "gptq_v2"}})
                .gptq_zero_offset,
            0);
  EXPECT_EQ(read({{"quant_method", "gptq"}, {"bits", 4}, {"group_size", -1}}).group_size, 0) << "-1: per channel";

  const WeightQuantization ct = read(w4a16(true));
  EXPECT_TRUE(ct.int4());
  EXPECT_EQ(ct.int4_layout, Layout::PackQuantized);
  EXPECT_EQ(ct.group_size, 128);
  EXPECT_EQ(read(w4a16(true, "channel")).group_size, 0);

  // FP8 is still FP8.
  EXPECT_TRUE(read({{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}}).fp8());
}

TEST(QuantizationConfig, WhatCannotBeLoadedIsRefusedByName) {
  std::string m = refusal({{"quant_method", "awq"}, {"bits", 4}, {"group_size", 128}, {"version", "gemv"}});
  EXPECT_NE(m.find("version is \"gemv\""), std::string::npos) << m;
  m = refusal({{"quant_method", "gptq"}, {"bits", 8}, {"group_size", 128}});
  EXPECT_NE(m.find("bits is 8"), std::string::npos) << m;
  m = refusal({{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 100}});
  EXPECT_NE(m.find("group_size must be -1"), std::string::npos) << m;
  m = refusal(w4a16(false));
  EXPECT_NE(m.find("asymmetric"), std::string::npos) << m;
  json int8 = w4a16(true);
  int8["config_groups"]["group_0"]["weights"]["num_bits"] = 8;
  m = refusal(int8);
  EXPECT_NE(m.find("8-bit int"), std::string::npos) << m;
  m = refusal({{"quant_method", "bitsandbytes"}});
  EXPECT_NE(m.find("\"bitsandbytes\""), std::string::npos) << m;
  EXPECT_NE(m.find("awq and gptq"), std::string::npos) << m;

  WeightQuantization q = read(w4a16(true));
  try {
    apply_quantization_flag("fp8", q);
    ADD_FAILURE() << "--quantization fp8 over a 4-bit checkpoint was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already quantized"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pagoda
