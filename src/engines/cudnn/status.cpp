// The public face of the cuDNN backend (eagle/engines/cudnn.hpp).
#include "eagle/engines/cudnn.hpp"

#include "eagle/core/error.hpp"
#include "engines/cudnn/backend.hpp"
#include "engines/cudnn/loader.hpp"
#include "engines/cudnn/lowering.hpp"

namespace eagle::engines {

std::string cudnn_backend_status() {
#ifdef EAGLE_HAVE_CUDA
  return cudnn::cudnn_library().status;
#else
  return "cuDNN backend not built: this build of eagle has no CUDA";
#endif
}

std::string cudnn_decline_reason(const op::Graph& graph) {
  try {
    cudnn::lower(graph);
  } catch (const NotSupported& e) {
    return e.what();
  }
  return cudnn::recorded_decline(graph);
}

}  // namespace eagle::engines
