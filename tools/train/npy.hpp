// A minimal writer of numpy's .npy format (version 1.0, little-endian, C order), for what the
// training job exports to a peer (numpy.load reads it): f32 and i32 arrays only.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace eagle::train {

// The header numpy expects: magic, version 1.0, header length, then the dict
// "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" padded with spaces and ended by
// '\n' so that the data starts at a multiple of 64 bytes.
std::string npy_header(const std::string& descr, const std::vector<int64_t>& shape);

// Writes `values` as an array of `shape` (its element count must equal values.size()). Throws
// InvalidArgument on a count mismatch, Error when the file cannot be written.
void write_npy(const std::filesystem::path& path, const std::vector<float>& values,
               const std::vector<int64_t>& shape);
void write_npy(const std::filesystem::path& path, const std::vector<int32_t>& values,
               const std::vector<int64_t>& shape);

}  // namespace eagle::train
