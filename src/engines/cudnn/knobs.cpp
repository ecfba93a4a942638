#include "engines/cudnn/knobs.hpp"

#include <array>
#include <string_view>

namespace eagle::cudnn {

namespace {

// cudnn_frontend::KnobType_t 1..32 (cudnn_frontend/knobs.h), the values that mirror the
// backend's knobs, lower-cased.
constexpr std::array<std::string_view, 33> kNames = {"",
                                                     "swizzle",
                                                     "tile_size",
                                                     "edge",
                                                     "multiply",
                                                     "split_k_buf",
                                                     "tilek",
                                                     "stages",
                                                     "reduction_mode",
                                                     "split_k_slc",
                                                     "idx_mode",
                                                     "specfilt",
                                                     "kernel_cfg",
                                                     "workspace",
                                                     "tile_cga_m",
                                                     "tile_cga_n",
                                                     "block_size",
                                                     "occupancy",
                                                     "array_size_per_thread",
                                                     "split_cols",
                                                     "tile_rows",
                                                     "tile_cols",
                                                     "load_size",
                                                     "cta_count",
                                                     "stream_k",
                                                     "split_p_slc",
                                                     "tile_m",
                                                     "tile_n",
                                                     "warp_spec_cfg",
                                                     "swap_ab",
                                                     "input_tma_enable",
                                                     "output_tma_enable",
                                                     "tile_cga"};

}  // namespace

std::string knob_name(int64_t type) {
  if (type <= 0 || type >= static_cast<int64_t>(kNames.size())) return "";
  return std::string(kNames[static_cast<std::size_t>(type)]);
}

int64_t knob_type(const std::string& name) {
  for (std::size_t i = 1; i < kNames.size(); ++i)
    if (kNames[i] == name) return static_cast<int64_t>(i);
  return -1;
}

}  // namespace eagle::cudnn
