// Reference gradients of the structured operations (the *_bwd ops of the table), over Dense
// tensors, in float64. Each is the exact derivative of its forward routine in structured.hpp, in
// the form torch's autograd gives; bad shapes or data throw InvalidArgument as the forwards do.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "engines/reference/math/dense.hpp"

namespace eagle::reference {

// From the forward's output y and the output's gradient dy (same dims) along `axis`:
// softmax: dx = y * (dy - sum(dy * y)); log softmax: dx = dy - exp(y) * sum(dy).
Dense softmax_bwd(const Dense& y, const Dense& dy, int axis, bool log);

struct NormGrads {
  Dense dx, dscale, dbias;  // dscale empty without a scale; dbias empty unless asked
};
// From dy, the forward's input x and its statistics (mean and inv_std of layer_norm; rms_norm has
// no mean: pass null), over the trailing normalized_ndim dims. With xhat = (x - mean) * inv_std and
// g = dy * scale (dy without a scale), n the normalized count:
//   dx = inv_std * (g - [mean(g) when centered] - xhat * mean(g * xhat)),
//   dscale = sum over the leading dims of dy * xhat, dbias = sum over the leading dims of dy.
NormGrads norm_bwd(std::string_view op, const Dense& dy, const Dense& x, const Dense* mean,
                   const Dense& inv_std, const Dense* scale, int normalized_ndim, bool bias_grad);

// The gradient of the table of an embedding lookup: dtable [V, D] where row v is the sum of the
// rows of dy [..., D] whose id is v, added in the order of the ids (deterministic). An id outside
// [0, V) is refused as the forward refuses it.
Dense embedding_bwd(const Dense& dy, const std::vector<int64_t>& ids, int64_t num_embeddings);

// The gradient of cross_entropy w.r.t. logits [N, C]: per counted row,
//   dlogits = w * (softmax(logits) - (1 - ls) * onehot(target) - ls / C),
// with w = dloss[r] (reduction none), dloss (sum) or dloss / counted rows (mean); ignored rows get
// 0. `lse` (may be null) is the forward's logsumexp, used as given when passed.
Dense cross_entropy_bwd(const Dense& logits, const std::vector<int64_t>& targets,
                        const Dense& dloss, const Dense* lse, int64_t ignore_index,
                        double label_smoothing, std::string_view reduction);

}  // namespace eagle::reference
