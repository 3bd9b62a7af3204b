//===- Npz.cpp - numpy .npy arrays in uncompressed .npz archives -----------===//
//
// The zip container (PKWARE APPNOTE 6.3: local headers, central directory,
// end of central directory, zip64 records) holding stored .npy entries (numpy's
// format spec, NEP 1: magic, version, header dict, data). Reading takes sizes
// and offsets from the central directory, which is always exact, and checks
// each entry's CRC-32; writing produces plain (non-zip64) stored entries.
//
//===----------------------------------------------------------------------===//
#include "Npz.h"

#include "Files.h"
#include "Internal.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

namespace piperun {

int64_t NpyArray::numel() const {
  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  return count;
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

namespace {

[[noreturn]] void error(const std::string &what, const std::string &text) {
  throw std::runtime_error(what + ": " + text);
}

/// A name from the file, safe to print on one line (control bytes become '?').
std::string printable(const std::string &name) {
  std::string out = name.substr(0, 200);
  for (char &c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F)
      c = '?';
  return out;
}

uint32_t crc32(const char *data, size_t size) {
  static uint32_t table[256];
  static bool ready = [] {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
    return true;
  }();
  (void)ready;
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i)
    c = table[(c ^ static_cast<uint8_t>(data[i])) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint64_t readLE(const char *p, int bytes) {
  uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i)
    value = (value << 8) | static_cast<uint8_t>(p[i]);
  return value;
}

void appendLE(std::vector<char> &out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

struct DescrEntry {
  const char *descr;
  int32_t dtype;
};
const DescrEntry kDescrs[] = {{"<f4", PIPE_F32}, {"<f8", PIPE_F64}, {"<f2", PIPE_F16},
                              {"<i8", PIPE_I64}, {"<i4", PIPE_I32}, {"|b1", PIPE_BOOL}};

const char *descrOf(int32_t dtype) {
  for (const DescrEntry &e : kDescrs)
    if (e.dtype == dtype)
      return e.descr;
  return nullptr;
}

int64_t elementBytes(int32_t dtype) {
  switch (dtype) {
  case PIPE_F64:
  case PIPE_I64:
    return 8;
  case PIPE_F32:
  case PIPE_I32:
    return 4;
  case PIPE_F16:
  case PIPE_BF16:
    return 2;
  default:
    return 1;
  }
}

/// The value after 'key': in numpy's header dict (a Python literal).
std::string dictValue(const std::string &header, const std::string &key, const std::string &what) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos)
    error(what, "the .npy header has no '" + key + "'");
  at = header.find(':', at);
  if (at == std::string::npos)
    error(what, "malformed .npy header");
  ++at;
  while (at < header.size() && header[at] == ' ')
    ++at;
  size_t end = at;
  if (at < header.size() && (header[at] == '\'' || header[at] == '"')) {
    end = header.find(header[at], at + 1);
    if (end == std::string::npos)
      error(what, "malformed .npy header");
    return header.substr(at + 1, end - at - 1);
  }
  if (at < header.size() && header[at] == '(') {
    end = header.find(')', at);
    if (end == std::string::npos)
      error(what, "malformed .npy header");
    return header.substr(at, end - at + 1);
  }
  while (end < header.size() && header[end] != ',' && header[end] != '}')
    ++end;
  return header.substr(at, end - at);
}

// The header's shape tuple, "(4, 3)", "(5,)" or "()": non-negative decimal
// dims whose product stays below 2^40 elements (no overflow further on).
std::vector<int64_t> shapeOf(const std::string &tuple, const std::string &where) {
  constexpr int64_t kMaxElements = int64_t{1} << 40;
  if (tuple.size() < 2 || tuple.front() != '(' || tuple.back() != ')')
    error(where, "malformed shape '" + tuple + "' in the .npy header");
  std::vector<int64_t> shape;
  std::stringstream dims(tuple.substr(1, tuple.size() - 2));
  std::string item;
  int64_t elements = 1;
  while (std::getline(dims, item, ',')) {
    size_t first = item.find_first_not_of(' '), last = item.find_last_not_of(' ');
    if (first == std::string::npos)
      continue;
    std::string digits = item.substr(first, last - first + 1);
    if (digits.empty() || digits.size() > 13 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      error(where, "malformed shape '" + tuple + "' in the .npy header");
    int64_t dim = std::stoll(digits);
    if (dim > kMaxElements || (dim > 0 && elements > kMaxElements / dim))
      error(where, "shape " + tuple + " has more than 2^40 elements");
    elements *= dim;
    shape.push_back(dim);
  }
  return shape;
}

NpyArray parseNpy(const char *data, size_t size, const std::string &name, const std::string &what) {
  const std::string where = what + ": array " + name;
  if (size < 10 || std::memcmp(data, "\x93NUMPY", 6) != 0)
    error(where, "not a .npy entry");
  int major = static_cast<uint8_t>(data[6]);
  size_t headerLength, headerStart;
  if (major == 1) {
    headerLength = readLE(data + 8, 2);
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12)
      error(where, "truncated .npy header");
    headerLength = readLE(data + 8, 4);
    headerStart = 12;
  } else {
    error(where, ".npy version " + std::to_string(major) + " is not supported");
  }
  if (headerStart + headerLength > size)
    error(where, "truncated .npy header");
  std::string header(data + headerStart, headerLength);

  NpyArray array;
  array.name = name;
  std::string descr = dictValue(header, "descr", where);
  if (descr.size() == 3 && descr[0] == '=')
    descr[0] = '<';
  if (descr == "<b1" || descr == "=b1")
    descr = "|b1";
  const DescrEntry *entry = nullptr;
  for (const DescrEntry &e : kDescrs)
    if (descr == e.descr)
      entry = &e;
  if (!entry)
    error(where, "dtype '" + descr +
                     "' is not supported (use float32, float64, float16, "
                     "int64, int32 or bool, little-endian)");
  array.dtype = entry->dtype;
  if (dictValue(header, "fortran_order", where) != "False")
    error(where, "Fortran-order arrays are not supported (save a C-order array)");
  array.shape = shapeOf(dictValue(header, "shape", where), where);
  size_t payload = static_cast<size_t>(array.numel() * elementBytes(array.dtype));
  size_t offset = headerStart + headerLength;
  if (size - offset != payload)
    error(where, "holds " + std::to_string(size - offset) + " data bytes, its shape " +
                     shapeString(array.shape) + " needs " + std::to_string(payload));
  array.bytes.assign(data + offset, data + size);
  return array;
}

std::vector<char> npyBytes(const NpyArray &array) {
  const char *descr = descrOf(array.dtype);
  if (!descr)
    throw std::runtime_error("array " + array.name + ": dtype " + dtypeName(array.dtype) +
                             " cannot be stored in .npy");
  std::string shape = "(";
  for (size_t i = 0; i < array.shape.size(); ++i)
    shape += (i ? ", " : "") + std::to_string(array.shape[i]);
  shape += array.shape.size() == 1 ? ",)" : ")";
  std::string header =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // numpy pads the header with spaces so that the data starts 64-byte aligned.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::vector<char> out = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
  appendLE(out, header.size(), 2);
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), array.bytes.begin(), array.bytes.end());
  return out;
}

} // namespace

std::vector<NpyArray> parseNpz(const std::vector<char> &archive, const std::string &what) {
  const char *base = archive.data();
  const size_t size = archive.size();
  // [offset, offset + length) lies in the archive (offsets come from the file
  // and may be anything up to 2^64 - 1: no sum that could wrap).
  auto within = [size](uint64_t offset, uint64_t length) {
    return offset <= size && length <= size - offset;
  };
  // The end-of-central-directory record: 22 bytes plus a comment of up to 64 KiB.
  if (size < 22)
    error(what, "not an .npz archive (too short)");
  size_t eocd = std::string::npos;
  for (size_t at = size - 22 + 1; at-- > 0 && size - at <= 22 + 65535;)
    if (readLE(base + at, 4) == 0x06054b50) {
      eocd = at;
      break;
    }
  if (eocd == std::string::npos)
    error(what, "not an .npz archive (no zip directory)");
  uint64_t entries = readLE(base + eocd + 10, 2);
  uint64_t directoryOffset = readLE(base + eocd + 16, 4);
  if ((entries == 0xFFFF || directoryOffset == 0xFFFFFFFF) && eocd >= 20 &&
      readLE(base + eocd - 20, 4) == 0x07064b50) {
    uint64_t record = readLE(base + eocd - 20 + 8, 8);
    if (!within(record, 56) || readLE(base + record, 4) != 0x06064b50)
      error(what, "corrupt zip64 directory");
    entries = readLE(base + record + 32, 8);
    directoryOffset = readLE(base + record + 48, 8);
  }

  std::vector<NpyArray> arrays;
  uint64_t at = directoryOffset;
  for (uint64_t i = 0; i < entries; ++i) {
    if (!within(at, 46) || readLE(base + at, 4) != 0x02014b50)
      error(what, "corrupt zip directory");
    uint64_t method = readLE(base + at + 10, 2);
    uint32_t crc = static_cast<uint32_t>(readLE(base + at + 16, 4));
    uint64_t compressed = readLE(base + at + 20, 4);
    uint64_t uncompressed = readLE(base + at + 24, 4);
    size_t nameLength = readLE(base + at + 28, 2), extraLength = readLE(base + at + 30, 2),
           commentLength = readLE(base + at + 32, 2);
    uint64_t local = readLE(base + at + 42, 4);
    if (!within(at + 46, nameLength + extraLength + commentLength))
      error(what, "corrupt zip directory");
    const std::string name = printable(std::string(base + at + 46, nameLength));
    // Zip64 extended information: the 8-byte fields whose 4-byte ones are 0xFFFFFFFF.
    const char *extra = base + at + 46 + nameLength;
    for (size_t e = 0; e + 4 <= extraLength;) {
      uint64_t id = readLE(extra + e, 2), length = readLE(extra + e + 2, 2);
      if (e + 4 + length > extraLength)
        error(what, "corrupt zip directory (extra field of entry " + name + ")");
      if (id == 0x0001) {
        const char *field = extra + e + 4, *end = field + length;
        auto next = [&](uint64_t &value) {
          if (value != 0xFFFFFFFF)
            return;
          if (end - field < 8)
            error(what, "corrupt zip64 field of entry " + name);
          value = readLE(field, 8);
          field += 8;
        };
        next(uncompressed);
        next(compressed);
        next(local);
      }
      e += 4 + length;
    }
    at += 46 + nameLength + extraLength + commentLength;

    // np.savez names each entry "<array>.npy"; the array is known by <array>.
    if (name.size() <= 4 || name.compare(name.size() - 4, 4, ".npy") != 0)
      error(what, "zip entry '" + name + "' is not a .npy array (\"<name>.npy\")");
    std::string arrayName = name.substr(0, name.size() - 4);
    for (const NpyArray &earlier : arrays)
      if (earlier.name == arrayName)
        error(what, "array " + arrayName + " appears twice");
    if (method != 0)
      error(what,
            "array " + arrayName + " is compressed (np.savez_compressed); write it with np.savez");
    if (!within(local, 30) || readLE(base + local, 4) != 0x04034b50)
      error(what, "corrupt zip entry " + name);
    uint64_t start = local + 30 + readLE(base + local + 26, 2) + readLE(base + local + 28, 2);
    if (!within(start, uncompressed) || compressed != uncompressed)
      error(what, "truncated zip entry " + name);
    if (crc32(base + start, uncompressed) != crc)
      error(what, "array " + arrayName + " is corrupt (CRC mismatch)");
    arrays.push_back(parseNpy(base + start, uncompressed, arrayName, what));
  }
  return arrays;
}

std::vector<NpyArray> readNpz(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    error(path, "cannot open (" + std::string(std::strerror(errno)) + ")");
  std::vector<char> archive((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parseNpz(archive, path);
}

std::vector<char> serializeNpz(const std::vector<NpyArray> &arrays) {
  std::vector<char> out, directory;
  for (const NpyArray &array : arrays) {
    std::vector<char> npy = npyBytes(array);
    std::string name = array.name + ".npy";
    if (out.size() + npy.size() > 0xFFFFFFFEull)
      throw std::runtime_error("array " + array.name + ": archives over 4 GiB are not supported");
    uint32_t crc = crc32(npy.data(), npy.size());
    uint64_t offset = out.size();
    // Local header: version 2.0, no flags, stored, DOS date 1980-01-01.
    appendLE(out, 0x04034b50, 4);
    appendLE(out, 20, 2);
    appendLE(out, 0, 2);
    appendLE(out, 0, 2);
    appendLE(out, 0, 2);
    appendLE(out, 0x21, 2);
    appendLE(out, crc, 4);
    appendLE(out, npy.size(), 4);
    appendLE(out, npy.size(), 4);
    appendLE(out, name.size(), 2);
    appendLE(out, 0, 2);
    out.insert(out.end(), name.begin(), name.end());
    out.insert(out.end(), npy.begin(), npy.end());

    appendLE(directory, 0x02014b50, 4);
    appendLE(directory, 20, 2);
    appendLE(directory, 20, 2);
    appendLE(directory, 0, 2);
    appendLE(directory, 0, 2);
    appendLE(directory, 0, 2);
    appendLE(directory, 0x21, 2);
    appendLE(directory, crc, 4);
    appendLE(directory, npy.size(), 4);
    appendLE(directory, npy.size(), 4);
    appendLE(directory, name.size(), 2);
    appendLE(directory, 0, 2);
    appendLE(directory, 0, 2);
    appendLE(directory, 0, 2);
    appendLE(directory, 0, 2);
    appendLE(directory, 0, 4);
    appendLE(directory, offset, 4);
    directory.insert(directory.end(), name.begin(), name.end());
  }
  if (arrays.size() > 0xFFFF)
    throw std::runtime_error("more than 65535 arrays in one .npz are not supported");
  uint64_t directoryOffset = out.size();
  out.insert(out.end(), directory.begin(), directory.end());
  appendLE(out, 0x06054b50, 4);
  appendLE(out, 0, 2);
  appendLE(out, 0, 2);
  appendLE(out, arrays.size(), 2);
  appendLE(out, arrays.size(), 2);
  appendLE(out, directory.size(), 4);
  appendLE(out, directoryOffset, 4);
  appendLE(out, 0, 2);
  return out;
}

void writeNpz(const std::string &path, const std::vector<NpyArray> &arrays) {
  std::vector<char> archive = serializeNpz(arrays);
  writeFileAtomically(path, std::string(archive.begin(), archive.end()), "arrays");
}

} // namespace piperun
