// Typed, strict access to the fields of one JSON object, shared by the
// partitioner's formats (problem JSON, plan JSON) and the runtime's
// (program.json): a field of the wrong type, a null, a decimal where an
// integer belongs, an integer out of range or an unknown key throws Error (the
// template argument, constructed from a message) naming the file and the field,
// never a silent default or a wrapped value. Header-only; needs nlohmann_json.
#ifndef PIPE_SUPPORT_JSONFIELDS_H
#define PIPE_SUPPORT_JSONFIELDS_H

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace pipe_support {

/// A JSON value as a short one-line excerpt for messages (invalid UTF-8 replaced).
inline std::string jsonExcerpt(const nlohmann::json &value) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > 40)
    text = text.substr(0, 37) + "...";
  return text;
}

template <typename Error> class JsonFields {
public:
  /// `where` prefixes every message ("model.json: layers[3]"); `known` lists the
  /// keys the object may hold (empty: any).
  JsonFields(const nlohmann::json &object, std::string where,
             std::initializer_list<const char *> known = {})
      : JsonFields(object, std::move(where), ".", known) {}

  /// The top-level object of a document named `name`: fields read "name: key".
  static JsonFields document(const nlohmann::json &object, std::string name,
                             std::initializer_list<const char *> known = {}) {
    return JsonFields(object, std::move(name), ": ", known);
  }

private:
  JsonFields(const nlohmann::json &object, std::string where, const char *separator,
             std::initializer_list<const char *> known)
      : object(object), where(std::move(where)), separator(separator) {
    if (!object.is_object())
      throw Error(this->where + " must be a JSON object, got " + jsonExcerpt(object));
    if (known.size() == 0)
      return;
    for (const auto &item : object.items()) {
      bool isKnown = false;
      for (const char *key : known)
        isKnown |= item.key() == key;
      if (!isKnown) {
        std::string list;
        for (const char *key : known)
          list += (list.empty() ? "" : ", ") + std::string(key);
        throw Error(this->where + ": unknown field " + jsonExcerpt(item.key()) +
                    " (known: " + list + ")");
      }
    }
  }

public:
  bool has(const std::string &key) const { return object.contains(key); }
  const std::string &location() const { return where; }
  std::string field(const std::string &key) const { return where + separator + key; }

  /// The value of `key`; null is never a default.
  const nlohmann::json &at(const std::string &key) const {
    const nlohmann::json &value = object.at(key);
    if (value.is_null())
      throw Error(field(key) + " is null; give a value or leave the field out");
    return value;
  }

  /// A finite number (no strings: units would be guessed).
  double number(const std::string &key, double fallback) const {
    if (!has(key))
      return fallback;
    return numberValue(at(key), field(key));
  }

  /// A number of bytes, or a size string such as "16GB" (parse is parseBytes).
  template <typename ParseSize>
  double bytes(const std::string &key, double fallback, ParseSize parse) const {
    if (!has(key))
      return fallback;
    const nlohmann::json &value = at(key);
    if (value.is_string()) {
      try {
        return parse(value.get<std::string>());
      } catch (const Error &error) {
        throw Error(field(key) + ": " + error.what());
      }
    }
    if (!value.is_number())
      throw Error(field(key) + " must be a number of bytes or a size such as \"16GB\", got " +
                  jsonExcerpt(value));
    return numberValue(value, field(key));
  }

  /// An integer in [min, max]; 2.5, 1e3 and "4" are errors.
  int64_t integer(const std::string &key, int64_t fallback, int64_t min, int64_t max) const {
    if (!has(key))
      return fallback;
    return integerValue(at(key), field(key), min, max);
  }

  bool boolean(const std::string &key, bool fallback) const {
    if (!has(key))
      return fallback;
    const nlohmann::json &value = at(key);
    if (!value.is_boolean())
      throw Error(field(key) + " must be true or false, got " + jsonExcerpt(value));
    return value.get<bool>();
  }

  std::string string(const std::string &key, const std::string &fallback) const {
    if (!has(key))
      return fallback;
    const nlohmann::json &value = at(key);
    if (!value.is_string())
      throw Error(field(key) + " must be a string, got " + jsonExcerpt(value));
    return value.get<std::string>();
  }

  const nlohmann::json &array(const std::string &key) const {
    const nlohmann::json &value = at(key);
    if (!value.is_array())
      throw Error(field(key) + " must be an array, got " + jsonExcerpt(value));
    return value;
  }

  std::vector<std::string> strings(const std::string &key) const {
    std::vector<std::string> out;
    const nlohmann::json &items = array(key);
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string())
        throw Error(field(key) + "[" + std::to_string(i) + "] must be a string, got " +
                    jsonExcerpt(items[i]));
      out.push_back(items[i].get<std::string>());
    }
    return out;
  }

  std::vector<int64_t> integers(const std::string &key, int64_t min, int64_t max) const {
    std::vector<int64_t> out;
    const nlohmann::json &items = array(key);
    for (size_t i = 0; i < items.size(); ++i)
      out.push_back(integerValue(items[i], field(key) + "[" + std::to_string(i) + "]", min, max));
    return out;
  }

  std::vector<double> numbers(const std::string &key) const {
    std::vector<double> out;
    const nlohmann::json &items = array(key);
    for (size_t i = 0; i < items.size(); ++i)
      out.push_back(numberValue(items[i], field(key) + "[" + std::to_string(i) + "]"));
    return out;
  }

  static double numberValue(const nlohmann::json &value, const std::string &what) {
    if (!value.is_number())
      throw Error(what + " must be a number, got " + jsonExcerpt(value));
    const double result = value.get<double>();
    if (!std::isfinite(result))
      throw Error(what + " must be finite");
    return result;
  }

  static int64_t integerValue(const nlohmann::json &value, const std::string &what, int64_t min,
                              int64_t max) {
    if (!value.is_number_integer())
      throw Error(what + " must be an integer, got " + jsonExcerpt(value));
    bool inRange;
    int64_t result = 0;
    if (value.is_number_unsigned()) {
      const uint64_t u = value.get<uint64_t>();
      inRange = max >= 0 && u <= static_cast<uint64_t>(max) && (min <= 0 || u >= static_cast<uint64_t>(min));
      result = inRange ? static_cast<int64_t>(u) : 0;
    } else {
      result = value.get<int64_t>();
      inRange = result >= min && result <= max;
    }
    if (!inRange)
      throw Error(what + " is " + jsonExcerpt(value) + ", outside " + std::to_string(min) +
                  ".." + std::to_string(max));
    return result;
  }

private:
  const nlohmann::json &object;
  std::string where;
  const char *separator;
};

} // namespace pipe_support

#endif // PIPE_SUPPORT_JSONFIELDS_H
