#include "ragged/row_derivative.hpp"

#include <optional>
#include <vector>

#include "eagle/graph/derivative.hpp"
#include "eagle/ragged/kernels.hpp"

namespace eagle::ragged::detail {

std::shared_ptr<const Derivative> masked_cotangent_rule() {
  constexpr int kX = 0, kCuSeqlens = 1, kY = 2;
  return vjp_rule(
      [](Recorder& r, const VjpArgs& a) {
        std::vector<std::optional<Value>> grads(3);
        if (a.wanted[kX] && a.cotangents[kY])
          grads[kX] = r.call(mask_rows(), {*a.cotangents[kY], a.arrays[kCuSeqlens]});
        return grads;
      },
      {kCuSeqlens});
}

}  // namespace eagle::ragged::detail
