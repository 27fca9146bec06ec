#include "json_writer.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <system_error>
#include <utility>

namespace softdla {

namespace {

// The length of the valid UTF-8 sequence at s[i], or 0 if there is none (RFC 3629: no overlong forms,
// no surrogates, nothing above U+10FFFF).
size_t utf8_sequence(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  size_t n;
  unsigned char lo = 0x80, hi = 0xbf;  // the range of the second byte
  if (c >= 0xc2 && c <= 0xdf) n = 2;
  else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;   // overlong
    if (c == 0xed) hi = 0x9f;   // surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;   // overlong
    if (c == 0xf4) hi = 0x8f;   // above U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (b(1) < lo || b(1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (b(k) < 0x80 || b(k) > 0xbf) return 0;
  return n;
}

template <class T>
std::string shortest(T v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip form
  if (r.ec != std::errc()) throw std::logic_error("json_number: to_chars failed");
  return std::string(buf, r.ptr);
}

}  // namespace

std::string json_quote(std::string_view s) {
  static const char* const hex = "0123456789abcdef";
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
          if (c < 0x20) {
            out += "\\u00";
            out += hex[c >> 4];
            out += hex[c & 15];
          } else {
            out += char(c);
          }
      }
      ++i;
      continue;
    }
    if (const size_t n = utf8_sequence(s, i)) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\\ufffd";
      ++i;
    }
  }
  out += '"';
  return out;
}

std::string json_number(double v) { return shortest(v); }
std::string json_number(float v) { return shortest(v); }

double json_float_value(float v) {
  if (!std::isfinite(v)) return double(v);
  const std::string text = shortest(v);
  double d = 0;
  std::from_chars(text.data(), text.data() + text.size(), d);
  return d;
}

void JsonWriter::newline(size_t depth) {
  if (indent_ == 0) return;
  out_ += '\n';
  out_.append(depth * size_t(indent_), ' ');
}

void JsonWriter::flush_held(Frame& f) {
  if (!f.inline_ok) return;
  f.inline_ok = false;
  const size_t depth = stack_.size();  // f is the top frame
  for (size_t k = 0; k < f.held.size(); ++k) {
    if (k) out_ += indent_ ? "," : ", ";
    newline(depth);
    out_ += f.held[k];
  }
  f.held.clear();
}

void JsonWriter::before_value(bool container) {
  if (stack_.empty()) {
    if (top_written_) throw std::logic_error("JsonWriter: a second top-level value");
    return;
  }
  Frame& f = stack_.back();
  if (f.object) {
    if (!f.key_pending) throw std::logic_error("JsonWriter: a value in an object needs key() first");
    f.key_pending = false;
    ++f.count;
    return;
  }
  if (container) flush_held(f);
  if (f.inline_ok) return;  // held: scalar() stores it
  if (f.count) out_ += indent_ ? "," : ", ";
  newline(stack_.size());
  ++f.count;
}

JsonWriter& JsonWriter::scalar(std::string_view text) {
  before_value(false);
  if (!stack_.empty() && !stack_.back().object && stack_.back().inline_ok) {
    stack_.back().held.emplace_back(text);
    ++stack_.back().count;
    return *this;
  }
  out_.append(text);
  if (stack_.empty()) top_written_ = true;
  return *this;
}

JsonWriter& JsonWriter::raw(std::string_view json) {
  before_value(true);
  out_.append(json);
  if (stack_.empty()) top_written_ = true;
  return *this;
}

JsonWriter& JsonWriter::key(std::string_view k) {
  if (stack_.empty() || !stack_.back().object) throw std::logic_error("JsonWriter: key() outside an object");
  Frame& f = stack_.back();
  if (f.key_pending) throw std::logic_error("JsonWriter: key() twice without a value");
  if (f.count) out_ += indent_ ? "," : ", ";
  newline(stack_.size());
  out_ += json_quote(k);
  out_ += ": ";
  f.key_pending = true;
  return *this;
}

JsonWriter& JsonWriter::begin_object() {
  before_value(true);
  out_ += '{';
  Frame f;
  f.object = true;
  stack_.push_back(std::move(f));
  return *this;
}

JsonWriter& JsonWriter::begin_array() {
  before_value(true);
  out_ += '[';
  stack_.push_back(Frame());
  return *this;
}

JsonWriter& JsonWriter::end_object() {
  if (stack_.empty() || !stack_.back().object) throw std::logic_error("JsonWriter: end_object() without begin_object()");
  if (stack_.back().key_pending) throw std::logic_error("JsonWriter: end_object() after a key with no value");
  const bool empty = stack_.back().count == 0;
  stack_.pop_back();
  if (!empty) newline(stack_.size());
  out_ += '}';
  if (stack_.empty()) top_written_ = true;
  return *this;
}

JsonWriter& JsonWriter::end_array() {
  if (stack_.empty() || stack_.back().object) throw std::logic_error("JsonWriter: end_array() without begin_array()");
  Frame& f = stack_.back();
  if (f.inline_ok) {
    for (size_t k = 0; k < f.held.size(); ++k) {
      if (k) out_ += ", ";
      out_ += f.held[k];
    }
    stack_.pop_back();
  } else {
    const bool empty = f.count == 0;
    stack_.pop_back();
    if (!empty) newline(stack_.size());
  }
  out_ += ']';
  if (stack_.empty()) top_written_ = true;
  return *this;
}

}  // namespace softdla
