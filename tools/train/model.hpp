// The training job's model and its one-graph training step (issue 13): token embedding, L blocks
// of [rms_norm, q/k/v projections, causal varlen attention over the packed batch, output
// projection, residual, rms_norm, MLP (silu), residual], final rms_norm, LM head, cross entropy
// averaged over the tokens of the loss mask; then the reverse pass (diff::gradients) and a fused
// AdamW, all recorded into one graph, one launch per step.
//
// The structured parts are planned operations (op::Graphs recorded as engines::planned_segments:
// one planned kernel per piece an engine family serves, each differentiated by op::backward); glue
// (masks, the step counter, the update) are standard kernels. Padding rows (past L = cu_seqlens[N])
// follow the seed's rules: the attention output's padding rows are undefined, so they are masked
// (where) before the output projection reduces over rows in its weight gradient; q, k, v pass
// through a where that is also their gradient barrier (sdpa_bwd's padding rows of dq, dk, dv never
// reach the projections' weight gradients).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "eagle/eagle.hpp"

namespace eagle::train {

struct ModelConfig {
  int64_t vocab = data::kByteVocabulary;
  int64_t dim = 64;
  int64_t heads = 4;
  int64_t layers = 2;
  int64_t mlp = 0;  // hidden width of the MLP; 0: 4 * dim
  // The dtype attention computes in (q, k, v cast to it, o cast back to f32): f32 on the CPU;
  // bf16 on a GPU, whose attention kernels serve 16-bit floats (head dim 64 or 128).
  DType attention_dtype = DType::f32;
  // The dtype the projections multiply in (x and W cast to it, the product cast back to f32):
  // f32, or bf16 for the tensor cores' rate. Params, moments, norms and the residual stream stay
  // f32 either way (what torch's autocast does to a matmul).
  DType matmul_dtype = DType::f32;
  int64_t mlp_width() const { return mlp > 0 ? mlp : 4 * dim; }
  // Throws InvalidArgument naming the field when a size is not positive or dim % heads != 0.
  void check() const;
};

struct AdamwConfig {
  double lr = 3e-3, beta1 = 0.9, beta2 = 0.99, eps = 1e-8, weight_decay = 0.01;
};

// What persists across steps, at stable addresses (externals of the step graph): the f32 master
// params, AdamW's moments and its step counter.
struct TrainState {
  std::vector<std::string> names;  // one per param: "embed", "l0.wq", ..., "head"
  std::vector<Array> params, m, v;
  Array count;  // [1] i64: steps taken
  // Initial params from `seed` (uniform, scaled by fan-in; norm gains 1), zero moments.
  static TrainState init(const ModelConfig& config, uint64_t seed, Device device);
  int64_t param_count() const;  // elements over all params
};

// The batch as the step graph reads it: params sized for the largest capacity (a bucket of
// capacity T reads the prefix views [0, T) of the token rows); every step copies a PackedBatch
// into them.
struct BatchArrays {
  Array input_ids;   // [T] i32
  Array labels;      // [T] i32, -100 where no loss is taken
  Array loss_mask;   // [T] f32
  Array cu_seqlens;  // [N + 1] i32
  static BatchArrays allocate(data::BatchCapacity capacity, Device device);
};

// Host staging of one batch (on the GPU: the pinned source of the asynchronous copies). The copies
// read it after load_batch returns: write it again only once they are done (the trainer waits for
// each step, whose launch follows the copies on the same stream).
struct BatchStaging {
  BatchArrays host;
  static BatchStaging allocate(data::BatchCapacity capacity);
};

// Copies `batch` into the step's batch params: directly on the CPU; on a GPU through `staging`
// with asynchronous copies on `stream`, which must be the stream of the graph launched next (each
// bucket's graph has its own), so that launch sees them.
// Throws InvalidArgument when the batch's capacity differs from the arrays'.
void load_batch(const data::PackedBatch& batch, BatchStaging& staging, const BatchArrays& arrays,
                const Stream* stream);

struct StepInputs {
  const ModelConfig* model = nullptr;
  TrainState* state = nullptr;
  const BatchArrays* batch = nullptr;
  AdamwConfig adamw;
  // Data parallelism: when set, every gradient is averaged across the communicator's ranks
  // (all_reduce avg) between the reverse pass and the update, so each rank's step is the step of
  // the mean of the ranks' losses (each the mean over that rank's loss-mask tokens).
  const comm::Communicator* average_gradients = nullptr;
};

// The planned operations of the model for one token capacity T (op::Graphs of fixed dims), made
// once per capacity.
class Model {
 public:
  explicit Model(ModelConfig config);
  const ModelConfig& config() const { return config_; }
  // Records one training step for token capacity `capacity` (T <= the batch arrays' rows):
  // forward, loss, gradients of every param (averaged across ranks when in.average_gradients is
  // set), then step_count and AdamW in place on the params.
  // Returns the loss (a [1] f32 value: the mean cross entropy over the loss mask's tokens, 0
  // when the mask is empty). Record with RecordOptions{.record = true}.
  Value record_step(Recorder& r, const StepInputs& in, int64_t capacity);
  // The model's operation graphs for capacity T and N slots (unplanned copies: embed, qkv,
  // attention, block_out, head), e.g. to check what a device's engines serve.
  std::vector<op::Graph> op_graphs(int64_t capacity, int64_t slots);
  // The forward alone (no gradients, no update), for checks; `params` (may be null) receives
  // the values of the params (externals), in TrainState order.
  Value record_loss(Recorder& r, const StepInputs& in, int64_t capacity,
                    std::vector<Value>* params = nullptr);

 private:
  struct Kernels;
  const Kernels& kernels(int64_t capacity, int64_t slots);
  Value forward(Recorder& r, const StepInputs& in, int64_t capacity,
                std::vector<Value>* param_values);
  ModelConfig config_;
  std::map<std::pair<int64_t, int64_t>, std::shared_ptr<const Kernels>> kernels_;
};

// One all_reduce(avg) per gradient across `comm`'s ranks, each into a new array, returned in
// param order. They are recorded in the order the reverse pass finished the gradients (the last
// layers' first), so in the built graph each waits only for its gradient and the all_reduce
// before it (a communicator's collectives run in recording order) and the first ones overlap
// the rest of the reverse pass. Params' shapes do not depend on the capacity and every bucket's
// reverse pass has the same structure, so every bucket's graph records the same collectives on
// the same shapes in the same order: ranks that run different buckets in a step still meet at
// matching collectives.
std::vector<Value> record_gradient_average(Recorder& r, const std::vector<Value>& grads,
                                           const comm::Communicator& comm);

// Records AdamW over `params` (grads, m, v alike) as ceil(n / kAdamwMaxTensors) fused calls after
// one step_count on `count`.
void record_adamw(Recorder& r, const Value& count, const std::vector<Value>& params,
                  const std::vector<Value>& grads, const std::vector<Value>& m,
                  const std::vector<Value>& v, const AdamwConfig& config);

}  // namespace eagle::train
