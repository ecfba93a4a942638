// Our CUDA embedding forward: y[r, :] = table[ids[r], :] for table [V, D] (any float dtype: rows
// are copied as bytes) and integer ids (i32, i64). Rows move in 16-byte units when the row size
// and both pointers allow, else in units of one element.
//
// An id outside [0, V) makes its output row NaN: the reference refuses such a call, but a
// refusal would need the ids on the host; the kernel never reads outside the table.
#pragma once

#include <cstdint>

#include "eagle/core/dtype.hpp"
#include "engines/native/row_geometry.hpp"

namespace eagle::native {

struct EmbeddingArgs {
  const void* table;
  const void* ids;
  void* y;
  int64_t rows;     // ids
  int64_t vocab;    // V
  int64_t units;    // copy units per row (row bytes / unit)
  uint32_t nan[4];  // 16 bytes of the dtype's NaN, written over a row with a bad id
};
using EmbeddingLauncher = bool (*)(const EmbeddingArgs& args, const RowGeometry& g,
                                   void* stream) noexcept;
// The launcher for copy units of `unit_bytes` (16, 4 or 2) and ids of `ids` (i32, i64), or
// nullptr. g is a row geometry over `units` packs of one unit each (vec = 1).
EmbeddingLauncher embedding_launcher(int unit_bytes, DType ids);

}  // namespace eagle::native
