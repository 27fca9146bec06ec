// src/common/json_writer.h (escaping, numbers, layout, misuse) and src/loadable/layer_info.h on the
// sample model that uses every op kind (docs/PROFILING.md, "Layer information").
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "json_writer.h"
#include "layer_info.h"
#include "sample_model.h"

namespace softdla {
namespace {

TEST(JsonWriter, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(json_quote(""), "\"\"");
  EXPECT_EQ(json_quote("a\"b\\c/d"), "\"a\\\"b\\\\c/d\"");
  EXPECT_EQ(json_quote("\n\r\t\b\f"), "\"\\n\\r\\t\\b\\f\"");
  EXPECT_EQ(json_quote(std::string("\x01\x1f\x7f", 3)), "\"\\u0001\\u001f\x7f\"");
  EXPECT_EQ(json_quote(std::string("a\0b", 3)), "\"a\\u0000b\"");
}

TEST(JsonWriter, PassesUtf8ThroughAndReplacesInvalidBytes) {
  EXPECT_EQ(json_quote("é ✓ 𝄞 中"), "\"é ✓ 𝄞 中\"");
  EXPECT_EQ(json_quote("\xff"), "\"\\ufffd\"");
  EXPECT_EQ(json_quote("a\xc3"), "\"a\\ufffd\"");                 // truncated sequence
  EXPECT_EQ(json_quote("\xc0\xaf"), "\"\\ufffd\\ufffd\"");         // overlong '/'
  EXPECT_EQ(json_quote("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");  // a UTF-16 surrogate
  EXPECT_EQ(json_quote("\xf4\x90\x80\x80"), "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");  // above U+10FFFF
  EXPECT_EQ(json_quote("\xe2\x9c\x93\x80x"), "\"✓\\ufffdx\"");
}

TEST(JsonWriter, NumbersRoundTripAndNonFiniteIsNull) {
  EXPECT_EQ(json_number(0.1), "0.1");
  EXPECT_EQ(json_number(0.1f), "0.1");
  EXPECT_EQ(json_number(1.0), "1");
  EXPECT_EQ(json_number(-2.5e-30), "-2.5e-30");
  EXPECT_EQ(json_number(1.0 / 3), "0.3333333333333333");
  EXPECT_EQ(json_number(std::numeric_limits<double>::quiet_NaN()), "null");
  EXPECT_EQ(json_number(std::numeric_limits<float>::infinity()), "null");
  EXPECT_EQ(json_number(-std::numeric_limits<double>::infinity()), "null");
  for (float f : {1.f / 127, 0.05f, 3.4e38f, 1e-45f, -7.25f}) {
    EXPECT_EQ(float(std::strtod(json_number(f).c_str(), nullptr)), f);
    EXPECT_EQ(json_float_value(f), std::strtod(json_number(f).c_str(), nullptr));
  }
  for (double d : {1.0 / 3, 6.02214076e23, 5e-324, -0.1}) EXPECT_EQ(std::strtod(json_number(d).c_str(), nullptr), d);
}

TEST(JsonWriter, PrettyAndCompactLayout) {
  auto write = [](JsonWriter& w) {
    w.begin_object().field("name", "x").field("n", uint64_t(18446744073709551615ull)).field("neg", int64_t(-3));
    w.key("shape").begin_array().value(1u).value(3u).end_array();
    w.key("rows").begin_array();
    w.begin_object().field("ok", true).field("v", 0.5).end_object();
    w.null();
    w.end_array();
    w.key("empty_object").begin_object().end_object();
    w.key("empty_array").begin_array().end_array();
    w.field("nan", std::nan(""));
    w.end_object();
  };
  JsonWriter compact(0);
  write(compact);
  EXPECT_TRUE(compact.done());
  EXPECT_EQ(compact.str(),
            "{\"name\": \"x\", \"n\": 18446744073709551615, \"neg\": -3, \"shape\": [1, 3], "
            "\"rows\": [{\"ok\": true, \"v\": 0.5}, null], \"empty_object\": {}, \"empty_array\": [], \"nan\": null}");
  JsonWriter pretty;
  write(pretty);
  EXPECT_EQ(pretty.str(),
            "{\n"
            "  \"name\": \"x\",\n"
            "  \"n\": 18446744073709551615,\n"
            "  \"neg\": -3,\n"
            "  \"shape\": [1, 3],\n"
            "  \"rows\": [\n"
            "    {\n"
            "      \"ok\": true,\n"
            "      \"v\": 0.5\n"
            "    },\n"
            "    null\n"
            "  ],\n"
            "  \"empty_object\": {},\n"
            "  \"empty_array\": [],\n"
            "  \"nan\": null\n"
            "}");
  JsonWriter nested;  // an array that stops being all scalars writes them one per line
  nested.begin_array().value(1).value("two").begin_array().end_array().end_array();
  EXPECT_EQ(nested.str(), "[\n  1,\n  \"two\",\n  []\n]");
  JsonWriter raw(0);
  raw.begin_object().key("inner").raw(compact.str()).end_object();
  EXPECT_EQ(raw.str(), "{\"inner\": " + compact.str() + "}");
}

TEST(JsonWriter, MisuseThrows) {
  JsonWriter a;
  a.begin_object();
  EXPECT_THROW(a.value(1), std::logic_error);  // a value without a key
  EXPECT_THROW(a.end_array(), std::logic_error);
  a.key("k");
  EXPECT_THROW(a.key("again"), std::logic_error);
  EXPECT_THROW(a.end_object(), std::logic_error);
  a.value(1).end_object();
  EXPECT_TRUE(a.done());
  EXPECT_THROW(a.value(2), std::logic_error);  // a second top-level value
  JsonWriter b;
  EXPECT_THROW(b.key("k"), std::logic_error);
  b.begin_array();
  EXPECT_THROW(b.key("k"), std::logic_error);
  EXPECT_FALSE(b.done());
}

TEST(LayerInfo, EveryOpKindOfTheSampleModel) {
  const Model m = testing::make_sample_model();
  const std::vector<LayerInfo> layers = describe_layers(m);
  ASSERT_EQ(layers.size(), m.ops.size());
  auto at = [&](const std::string& name) -> const LayerInfo& {
    for (const LayerInfo& l : layers)
      if (l.name == name) return l;
    throw std::runtime_error("no layer " + name);
  };
  for (size_t i = 0; i < layers.size(); ++i) {
    EXPECT_EQ(layers[i].index, i);
    EXPECT_EQ(layers[i].op, op_kind_name(m.ops[i].params));
  }
  const LayerInfo& conv = at("conv1");
  EXPECT_EQ(conv.macs, 1u * 8 * 16 * 16 * 3 * 3 * 3);
  EXPECT_EQ(conv.weight_bytes, 8u * 27 + 8 * 4 + 4 + 1);  // int8 weights, int32 bias, multiplier, shift
  EXPECT_EQ(conv.fused, (std::vector<std::string>{"bias", "relu", "requantize"}));
  EXPECT_EQ(conv.precision, "int8");
  EXPECT_EQ(conv.input_bytes, 3u * 16 * 16);
  EXPECT_EQ(conv.output_bytes, 8u * 16 * 16);
  EXPECT_EQ(conv.pad, (std::array<uint32_t, 4>{1, 1, 1, 1}));
  EXPECT_EQ(find_param(conv, "out_channels")->i, 8);

  const LayerInfo& avg = at("pool2");
  EXPECT_EQ(find_param(avg, "type")->s, "avg");
  EXPECT_EQ(avg.kernel, (std::array<uint32_t, 2>{3, 3}));
  EXPECT_EQ(avg.pad, (std::array<uint32_t, 4>{1, 1, 0, 0}));
  EXPECT_EQ(avg.macs, 8u * 8 * 8);  // one per output element

  const LayerInfo& add = at("add");
  EXPECT_EQ(find_param(add, "operation")->s, "add");
  EXPECT_EQ(add.fused, (std::vector<std::string>{"prelu"}));  // requant {1}, {0}: no requantize
  EXPECT_EQ(add.input_bytes, 2u * 512);
  EXPECT_EQ(add.weight_bytes, 4u + 4 + 1);

  const LayerInfo& deconv = at("deconv");
  EXPECT_EQ(deconv.macs, 14u * 1 * 15 * 4 * 2 * 2);  // N*C*Hi*Wi*K*kh*kw
  EXPECT_EQ(deconv.fused, (std::vector<std::string>{"sigmoid-lut", "requantize"}));
  EXPECT_EQ(deconv.out_channels, 4u);

  for (const char* moves : {"cat", "slice", "shuffle", "to_fp16"}) EXPECT_EQ(at(moves).macs, 0u) << moves;
  EXPECT_EQ(find_param(at("cat"), "axis")->i, 1);
  EXPECT_EQ(find_param(at("to_fp16"), "from")->s, "int8");
  EXPECT_EQ(find_param(at("to_fp16"), "to")->s, "fp16");
  EXPECT_EQ(find_param(at("slice"), "start")->ints, (std::vector<int64_t>{0, 2, 1, 0}));
  EXPECT_EQ(at("rmax").macs, 14u * 15);
  EXPECT_EQ(find_param(at("up"), "mode")->s, "bilinear");
  EXPECT_FLOAT_EQ(float(find_param(at("lrn"), "alpha")->f), 1e-3f);

  const LayerInfo& fc = at("fc");
  EXPECT_EQ(fc.precision, "fp16");
  EXPECT_EQ(fc.macs, 5u * 4 * 2 * 30);
  EXPECT_EQ(fc.weight_bytes, 5u * 4 * 2 * 30 * 2 + 5 * 4);
  EXPECT_EQ(fc.fused, (std::vector<std::string>{"bias", "clip", "tanh"}));

  const std::string json = layer_info_json(m, 0);
  EXPECT_EQ(json.front(), '[');
  EXPECT_EQ(json.back(), ']');
  EXPECT_NE(json.find("\"name\": \"conv1\", \"op\": \"conv\", \"precision\": \"int8\""), std::string::npos);
  EXPECT_NE(json.find("\"params\": {\"kernel\": [3, 3], \"stride\": [1, 1], \"pad\": [1, 1, 1, 1], \"dilation\": [1, 1], "
                      "\"groups\": 1, \"out_channels\": 8}"),
            std::string::npos);
  EXPECT_NE(json.find("\"fused\": [\"bias\", \"relu\", \"requantize\"], \"weight_bytes\": 253, \"macs\": 55296"),
            std::string::npos);
}

}  // namespace
}  // namespace softdla
