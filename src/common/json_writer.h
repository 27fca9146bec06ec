// A small streaming JSON writer (the project has no JSON library): what `inspect --json`, `check --json`
// and the profile exporters write with.
//
//   JsonWriter w;                     // 2 spaces per level; JsonWriter(0): one line
//   w.begin_object().field("name", "conv1").field("macs", uint64_t(4608));
//   w.key("shape").begin_array();
//   for (uint32_t d : shape) w.value(d);
//   w.end_array().end_object();
//   std::cout << w.str() << "\n";
//
// Strings: UTF-8 passes through as it is; '"', '\\' and the control characters U+0000..U+001F are escaped
// (\n \t \r \b \f, else \u00XX); a byte that is not part of a valid UTF-8 sequence (overlong forms and
// surrogates included) becomes \ufffd, so the output is always valid JSON.
// Numbers: integers exactly; a double as the shortest decimal that reads back to the same double, a float
// as the shortest that reads back to the same float (0.1f is written 0.1); NaN and infinities as null.
// Pretty mode writes objects one key per line and arrays of scalars on one line ("shape": [1, 3, 8, 8]).
// Misuse (a value where a key is due, an unbalanced end_*, a second top-level value) throws std::logic_error.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace softdla {

// `s` as a JSON string literal, quotes included.
std::string json_quote(std::string_view s);
// The JSON text of a number ("null" when not finite).
std::string json_number(double v);
std::string json_number(float v);
// The double that json_number(v) reads back as (what a JSON reader gets for a float written here): lets
// code that hands out the same data as native values (the Python bindings) match the JSON exactly.
double json_float_value(float v);

class JsonWriter {
 public:
  explicit JsonWriter(int indent = 2) : indent_(indent < 0 ? 0 : indent) {}

  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view k);

  JsonWriter& value(std::string_view s) { return scalar(json_quote(s)); }
  JsonWriter& value(const std::string& s) { return scalar(json_quote(s)); }
  JsonWriter& value(const char* s) { return s ? scalar(json_quote(s)) : null(); }
  JsonWriter& value(bool b) { return scalar(b ? "true" : "false"); }
  JsonWriter& value(double v) { return scalar(json_number(v)); }
  JsonWriter& value(float v) { return scalar(json_number(v)); }
  template <class T>
    requires(std::is_integral_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, char>)
  JsonWriter& value(T v) {
    return scalar(std::to_string(v));
  }
  JsonWriter& null() { return scalar("null"); }
  // A complete JSON value written elsewhere (e.g. another JsonWriter's str()), inserted as it is.
  JsonWriter& raw(std::string_view json);

  template <class T>
  JsonWriter& field(std::string_view k, const T& v) {
    key(k);
    return value(v);
  }

  // The text so far; complete once every container is closed (done()).
  const std::string& str() const { return out_; }
  bool done() const { return stack_.empty() && top_written_; }

 private:
  struct Frame {
    bool object = false;
    size_t count = 0;               // values (object: key/value pairs) written so far
    bool key_pending = false;       // object: key() written, its value not yet
    bool inline_ok = true;          // array: only scalars so far (they wait in `held`)
    std::vector<std::string> held;  // array: scalars not yet written
  };
  JsonWriter& scalar(std::string_view text);
  void before_value(bool container);  // separators/indentation before a value at the current level
  void flush_held(Frame& f);          // an array that stops being inline writes the scalars it held
  void newline(size_t depth);

  int indent_;
  std::string out_;
  std::vector<Frame> stack_;
  bool top_written_ = false;
};

}  // namespace softdla
