#include "eagle/data/documents.hpp"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>
#include <system_error>

#include "eagle/core/error.hpp"

namespace eagle::data {

namespace {

namespace fs = std::filesystem;

// The regular files under root in sorted path order (root itself when it is a file).
std::vector<fs::path> files_under(const fs::path& root) {
  std::error_code ec;
  if (!fs::exists(root, ec))
    throw InvalidArgument("read_documents: root '" + root.string() + "' does not exist");
  if (!fs::is_directory(root, ec)) return {root};
  std::vector<fs::path> files;
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec), end;
  for (; !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec)) files.push_back(it->path());
  std::sort(files.begin(), files.end());
  return files;
}

// The file's bytes, or nothing when it cannot be read or looks binary (a NUL in its first 4 KiB).
std::vector<char> text_of(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return {};
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto head =
      bytes.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(bytes.size(), 4096));
  if (std::find(bytes.begin(), head, '\0') != head) return {};
  return bytes;
}

}  // namespace

std::vector<Segment> read_documents(const fs::path& root, int64_t segment_cap, int64_t max_tokens,
                                    CorpusStats* stats) {
  if (segment_cap < 1)
    throw InvalidArgument("read_documents: segment_cap must be >= 1, got " +
                          std::to_string(segment_cap));
  if (max_tokens < 0)
    throw InvalidArgument("read_documents: max_tokens must be >= 0 (0: no limit), got " +
                          std::to_string(max_tokens));
  CorpusStats s;
  std::vector<Segment> segments;
  for (const fs::path& file : files_under(root)) {
    if (max_tokens > 0 && s.tokens >= max_tokens) break;
    std::vector<char> bytes = text_of(file);
    if (bytes.empty()) {
      ++s.skipped;
      continue;
    }
    if (max_tokens > 0 && s.tokens + static_cast<int64_t>(bytes.size()) > max_tokens)
      bytes.resize(static_cast<std::size_t>(max_tokens - s.tokens));
    ++s.files;
    s.tokens += static_cast<int64_t>(bytes.size());
    const auto n = static_cast<int64_t>(bytes.size());
    const int64_t parts = n / segment_cap + (n % segment_cap != 0);  // no overflow near INT64_MAX
    if (parts > 1) ++s.split_documents;
    for (int64_t k = 0; k < parts; ++k) {
      Segment seg;
      seg.source = parts > 1 ? file.string() + "#" + std::to_string(k) : file.string();
      const int64_t begin = k * segment_cap, stop = std::min(n, begin + segment_cap);
      seg.tokens.reserve(static_cast<std::size_t>(stop - begin));
      for (int64_t i = begin; i < stop; ++i)
        seg.tokens.push_back(static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]));
      segments.push_back(std::move(seg));
    }
  }
  s.segments = static_cast<int64_t>(segments.size());
  if (stats) *stats = s;
  return segments;
}

std::vector<int64_t> read_lengths(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw InvalidArgument("read_lengths: cannot open '" + file.string() + "'");
  std::vector<int64_t> lengths;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    std::istringstream fields(line);
    long long value = 0;
    std::string rest;
    if (!(fields >> value) || (fields >> rest) || value < 1)
      throw InvalidArgument("read_lengths: " + file.string() + ":" + std::to_string(number) +
                            ": expected one positive integer per line, got '" + line + "'");
    lengths.push_back(value);
  }
  return lengths;
}

std::vector<int64_t> split_lengths(const std::vector<int64_t>& lengths, int64_t segment_cap) {
  if (segment_cap < 1)
    throw InvalidArgument("split_lengths: segment_cap must be >= 1, got " +
                          std::to_string(segment_cap));
  std::vector<int64_t> out;
  for (int64_t n : lengths) {
    for (; n > segment_cap; n -= segment_cap) out.push_back(segment_cap);
    if (n > 0) out.push_back(n);
  }
  return out;
}

}  // namespace eagle::data
