// The .npy writer (npy.hpp).
#include "train/npy.hpp"

#include <bit>
#include <fstream>

#include "eagle/eagle.hpp"

namespace eagle::train {

namespace {

static_assert(std::endian::native == std::endian::little, "the .npy writer writes '<' (little)");

template <class T>
void write(const std::filesystem::path& path, const std::string& descr, const std::vector<T>& v,
           const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  if (n != static_cast<int64_t>(v.size()))
    throw InvalidArgument("write_npy: shape " + shape_str(shape) + " holds " + std::to_string(n) +
                          " elements, got " + std::to_string(v.size()) + " values for " +
                          path.string());
  std::ofstream out(path, std::ios::binary);
  const std::string header = npy_header(descr, shape);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(v.data()),
            static_cast<std::streamsize>(v.size() * sizeof(T)));
  if (!out) throw Error("write_npy: cannot write " + path.string());
}

}  // namespace

std::string npy_header(const std::string& descr, const std::vector<int64_t>& shape) {
  std::string dims;
  for (int64_t e : shape) dims += std::to_string(e) + ", ";
  if (shape.size() > 1) dims.resize(dims.size() - 2);  // (2, 3); a 1-d shape keeps "(5,)"
  if (shape.size() == 1) dims.resize(dims.size() - 1);
  std::string dict =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  const std::size_t preamble = 10;  // magic (6), version (2), header length (2)
  const std::size_t total = (preamble + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - preamble - dict.size() - 1, ' ');
  dict += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>((dict.size() >> 8) & 0xff);
  return out + dict;
}

void write_npy(const std::filesystem::path& path, const std::vector<float>& values,
               const std::vector<int64_t>& shape) {
  write(path, "<f4", values, shape);
}

void write_npy(const std::filesystem::path& path, const std::vector<int32_t>& values,
               const std::vector<int64_t>& shape) {
  write(path, "<i4", values, shape);
}

}  // namespace eagle::train
