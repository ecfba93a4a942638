// The training job's model: planned operations per capacity, the recorded step, AdamW groups.
#include "train/model.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>

namespace eagle::train {

namespace {

using op::Tensor;

void require(bool ok, const std::string& what) {
  if (!ok) throw InvalidArgument(what);
}

// An operation graph recorded as planned calls of segments one engine family serves
// (engines::planned_segments), so the same recording plans on the CPU's reference engine and on
// a GPU's engines alike. Operands are passed and returned by tensor name.
struct Planned {
  std::vector<engines::PlannedSegment> segments;
  std::map<std::string, int64_t> inputs, outputs;  // name -> uid in the whole graph
  explicit Planned(const op::Graph& g) : segments(engines::planned_segments(g)) {
    for (const Tensor& t : g.operand_tensors())
      (t.producer() < 0 ? inputs : outputs).emplace(t.name(), t.uid());
  }
  std::map<std::string, Value> call(Recorder& r, const std::map<std::string, Value>& args,
                                    const std::string& label) const {
    std::map<int64_t, Value> values;
    for (const auto& [name, uid] : inputs) {
      const auto it = args.find(name);
      require(it != args.end(), "train: planned op " + label + " misses operand '" + name + "'");
      values.emplace(uid, it->second);
    }
    for (std::size_t s = 0; s < segments.size(); ++s) {
      const engines::PlannedSegment& seg = segments[s];
      std::vector<Arg> ordered;
      for (int64_t uid : seg.inputs) ordered.emplace_back(values.at(uid));
      const std::string name = segments.size() == 1 ? label : label + "." + std::to_string(s);
      const std::vector<Value> out = r.call_all(seg.kernel, ordered, CallOptions{{}, name});
      for (std::size_t i = 0; i < out.size(); ++i) values.insert_or_assign(seg.outputs[i], out[i]);
    }
    std::map<std::string, Value> named;
    for (const auto& [name, uid] : outputs) named.emplace(name, values.at(uid));
    return named;
  }
};

constexpr DType f32 = DType::f32;

Tensor out(Tensor t, const std::string& name) {
  t.set_output(true).set_name(name);
  return t;
}

Tensor rms_norm(op::Graph& g, const Tensor& x, const Tensor& scale) {
  return g.op("rms_norm", {{"x", x}, {"scale", scale}}, {{"epsilon", 1e-5}}).at("y");
}

}  // namespace

void ModelConfig::check() const {
  require(vocab > 0, "train: vocab must be positive, got " + std::to_string(vocab));
  require(dim > 0, "train: --dim must be positive, got " + std::to_string(dim));
  require(heads > 0, "train: --heads must be positive, got " + std::to_string(heads));
  require(layers > 0, "train: --layers must be positive, got " + std::to_string(layers));
  require(dim % heads == 0, "train: --dim (" + std::to_string(dim) +
                                ") must be a multiple of --heads (" + std::to_string(heads) + ")");
  require(mlp >= 0, "train: mlp width must be >= 0, got " + std::to_string(mlp));
  require(
      matmul_dtype == DType::f32 || matmul_dtype == DType::bf16,
      "train: the matmul dtype must be f32 or bf16, got " + std::string(dtype_name(matmul_dtype)));
}

// ---------------------------------------------------------------------------------------------
// State and batch arrays

TrainState TrainState::init(const ModelConfig& c, uint64_t seed, Device device) {
  c.check();
  TrainState s;
  std::mt19937_64 rng(seed);
  const int64_t d = c.dim, f = c.mlp_width(), v = c.vocab;
  // Uniform with standard deviation `std` (gains: 1).
  auto add = [&](const std::string& name, const Shape& shape, double std) {
    int64_t n = 1;
    for (int64_t e : shape) n *= e;
    std::vector<float> values(static_cast<std::size_t>(n), 1.0f);
    if (std > 0) {
      std::uniform_real_distribution<double> u(-std * std::sqrt(3.0), std * std::sqrt(3.0));
      for (float& x : values) x = static_cast<float>(u(rng));
    }
    s.names.push_back(name);
    s.params.push_back(Array::from(values, shape, device));
    s.m.push_back(Array::from(std::vector<float>(values.size(), 0.0f), shape, device));
    s.v.push_back(Array::from(std::vector<float>(values.size(), 0.0f), shape, device));
  };
  const double fan_d = 1 / std::sqrt(static_cast<double>(d));
  const double fan_f = 1 / std::sqrt(static_cast<double>(f));
  // Projections into the residual stream start smaller, by 1 / sqrt(2 L).
  const double resid = 1 / std::sqrt(2.0 * static_cast<double>(c.layers));
  add("embed", {v, d}, 1.0);
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = "l" + std::to_string(l) + ".";
    add(p + "g1", {d}, 0);
    add(p + "wq", {d, d}, fan_d);
    add(p + "wk", {d, d}, fan_d);
    add(p + "wv", {d, d}, fan_d);
    add(p + "wo", {d, d}, fan_d * resid);
    add(p + "g2", {d}, 0);
    add(p + "w1", {d, f}, fan_d);
    add(p + "w2", {f, d}, fan_f * resid);
  }
  add("gf", {d}, 0);
  add("head", {d, v}, fan_d);
  s.count = Array::from(std::vector<int64_t>{0}, {1}, device);
  return s;
}

int64_t TrainState::param_count() const {
  int64_t n = 0;
  for (const Array& p : params) n += p.numel();
  return n;
}

BatchArrays BatchArrays::allocate(data::BatchCapacity cap, Device device) {
  require(cap.tokens > 0 && cap.slots > 0, "train: --tokens and --slots must be positive");
  BatchArrays b;
  b.input_ids = Array::empty({cap.tokens}, DType::i32, device);
  b.labels = Array::empty({cap.tokens}, DType::i32, device);
  b.loss_mask = Array::empty({cap.tokens}, f32, device);
  b.cu_seqlens = Array::empty({cap.slots + 1}, DType::i32, device);
  return b;
}

BatchStaging BatchStaging::allocate(data::BatchCapacity cap) {
  require(cap.tokens > 0 && cap.slots > 0, "train: --tokens and --slots must be positive");
  // Pinned where a GPU is usable: the step's copies then run asynchronously on its stream.
  BatchArrays b;
  b.input_ids = Array::empty_pinned({cap.tokens}, DType::i32);
  b.labels = Array::empty_pinned({cap.tokens}, DType::i32);
  b.loss_mask = Array::empty_pinned({cap.tokens}, f32);
  b.cu_seqlens = Array::empty_pinned({cap.slots + 1}, DType::i32);
  return BatchStaging{b};
}

void load_batch(const data::PackedBatch& batch, BatchStaging& staging, const BatchArrays& arrays,
                const Stream* stream) {
  const int64_t t = arrays.input_ids.numel(), n = arrays.cu_seqlens.numel() - 1;
  require(batch.capacity.tokens == t && batch.capacity.slots == n,
          "train: a batch of capacity T=" + std::to_string(batch.capacity.tokens) +
              ", N=" + std::to_string(batch.capacity.slots) +
              " does not fit arrays of T=" + std::to_string(t) + ", N=" + std::to_string(n));
  const bool host = arrays.input_ids.device().is_cpu();
  const BatchArrays& into = host ? arrays : staging.host;
  auto put = [](const Array& a, const void* src) { std::memcpy(a.data(), src, a.nbytes()); };
  put(into.input_ids, batch.input_ids.data());
  put(into.labels, batch.labels.data());
  put(into.loss_mask, batch.loss_mask.data());
  put(into.cu_seqlens, batch.cu_seqlens.data());
  if (host) return;
  arrays.input_ids.copy_from(staging.host.input_ids, stream);
  arrays.labels.copy_from(staging.host.labels, stream);
  arrays.loss_mask.copy_from(staging.host.loss_mask, stream);
  arrays.cu_seqlens.copy_from(staging.host.cu_seqlens, stream);
}

// ---------------------------------------------------------------------------------------------
// The planned operations for one capacity

namespace {

// `t` in `dt`: itself when it already is, else cast.
Tensor as_dtype(op::Graph& g, const Tensor& t, DType dt) {
  return t.dtype() == dt ? t : g.pointwise("cast", t, {{"dtype", dt}});
}

// x @ w in `dt` (both cast to it when they differ), the product back in f32.
Tensor project(op::Graph& g, const Tensor& x, const Tensor& w, DType dt) {
  return as_dtype(g, g.matmul(as_dtype(g, x, dt), as_dtype(g, w, dt)), DType::f32);
}

}  // namespace

struct Model::Kernels {
  std::unique_ptr<Planned> embed, qkv, attention, post, head;
  std::vector<op::Graph> graphs;  // the whole graphs, unplanned
};

Model::Model(ModelConfig config) : config_(config) {
  config_.check();
}

const Model::Kernels& Model::kernels(int64_t t, int64_t slots) {
  auto& slot = kernels_[{t, slots}];
  if (slot) return *slot;
  const int64_t d = config_.dim, h = config_.heads, f = config_.mlp_width(), v = config_.vocab;
  const DType md = config_.matmul_dtype;
  auto k = std::make_shared<Kernels>();
  {  // x = table[ids]
    op::Graph g("embed");
    const Tensor table = g.tensor({"table", {v, d}, f32});
    const Tensor ids = g.tensor({"ids", {t}, DType::i32});
    out(g.op("embedding", {{"table", table}, {"ids", ids}}).at("y"), "x");
    k->embed = std::make_unique<Planned>(g);
    k->graphs.push_back(g.clone());
  }
  {  // q, k, v = where(active, rms_norm(x) W, 0): also the gradient barrier before sdpa
    op::Graph g("qkv");
    const Tensor x = g.tensor({"x", {t, d}, f32});
    const Tensor g1 = g.tensor({"g1", {d}, f32});
    const Tensor wq = g.tensor({"wq", {d, d}, f32});
    const Tensor wk = g.tensor({"wk", {d, d}, f32});
    const Tensor wv = g.tensor({"wv", {d, d}, f32});
    const Tensor active = g.tensor({"active", {t, 1}, DType::u8});
    const Tensor zero = g.tensor({"zero", {1}, f32});
    const Tensor hn = rms_norm(g, x, g1);
    out(g.where(active, project(g, hn, wq, md), zero), "q");
    out(g.where(active, project(g, hn, wk, md), zero), "k");
    out(g.where(active, project(g, hn, wv, md), zero), "v");
    k->qkv = std::make_unique<Planned>(g);
    k->graphs.push_back(g.clone());
  }
  {  // causal softmax attention per sequence of the packed batch
    op::Graph g("attention");
    const Tensor q = g.tensor({"q", {t, h, d / h}, f32});
    const Tensor kk = g.tensor({"k", {t, h, d / h}, f32});
    const Tensor vv = g.tensor({"v", {t, h, d / h}, f32});
    const Tensor cu = g.tensor({"cu_seqlens", {slots + 1}, DType::i32});
    // In attention_dtype (GPU attention kernels serve 16-bit floats), f32 around it.
    const DType ad = config_.attention_dtype;
    const Tensor o = g.op("sdpa",
                          {{"q", as_dtype(g, q, ad)},
                           {"k", as_dtype(g, kk, ad)},
                           {"v", as_dtype(g, vv, ad)},
                           {"cu_seqlens_q", cu},
                           {"cu_seqlens_kv", cu}},
                          {{"causal", true}})
                         .at("o");
    out(as_dtype(g, o, f32), "o");
    k->attention = std::make_unique<Planned>(g);
    k->graphs.push_back(g.clone());
  }
  {  // x1 = x + where(active, o, 0) Wo; y = x1 + silu(rms_norm(x1) W1) W2
    op::Graph g("block_out");
    const Tensor x = g.tensor({"x", {t, d}, f32});
    const Tensor o = g.tensor({"o", {t, d}, f32});
    const Tensor active = g.tensor({"active", {t, 1}, DType::u8});
    const Tensor zero = g.tensor({"zero", {1}, f32});
    const Tensor wo = g.tensor({"wo", {d, d}, f32});
    const Tensor g2 = g.tensor({"g2", {d}, f32});
    const Tensor w1 = g.tensor({"w1", {d, f}, f32});
    const Tensor w2 = g.tensor({"w2", {f, d}, f32});
    const Tensor x1 = g.pointwise("add", x, project(g, g.where(active, o, zero), wo, md));
    const Tensor up = g.pointwise("silu", project(g, rms_norm(g, x1, g2), w1, md));
    out(g.pointwise("add", x1, project(g, up, w2, md)), "y");
    k->post = std::make_unique<Planned>(g);
    k->graphs.push_back(g.clone());
  }
  {  // loss = sum(ce(rms_norm(x) Wh, labels) * mask) / max(sum(mask), 1)
    op::Graph g("head");
    const Tensor x = g.tensor({"x", {t, d}, f32});
    const Tensor gf = g.tensor({"gf", {d}, f32});
    const Tensor wh = g.tensor({"wh", {d, v}, f32});
    const Tensor labels = g.tensor({"labels", {t}, DType::i32});
    const Tensor mask = g.tensor({"loss_mask", {t}, f32});
    const Tensor one = g.tensor({"one", {1}, f32});
    const Tensor logits = project(g, rms_norm(g, x, gf), wh, md);
    const Tensor ce = g.op("cross_entropy", {{"logits", logits}, {"targets", labels}},
                           {{"reduction", std::string("none")}, {"ignore_index", int64_t{-100}}})
                          .at("loss");
    auto total = [&g](const Tensor& a) {
      return g.op("reduction", {{"x", a}}, {{"mode", std::string("sum")}, {"keepdim", true}})
          .at("y");
    };
    const Tensor count = g.pointwise("max", total(mask), one);
    out(g.pointwise("div", total(g.pointwise("mul", ce, mask)), count), "loss");
    k->head = std::make_unique<Planned>(g);
    k->graphs.push_back(g.clone());
  }
  slot = k;
  return *slot;
}

std::vector<op::Graph> Model::op_graphs(int64_t capacity, int64_t slots) {
  std::vector<op::Graph> out;
  for (const op::Graph& g : kernels(capacity, slots).graphs) out.push_back(g.clone());
  return out;
}

// ---------------------------------------------------------------------------------------------
// Recording

Value Model::forward(Recorder& r, const StepInputs& in, int64_t t,
                     std::vector<Value>* param_values) {
  require(in.model && in.state && in.batch, "train: StepInputs needs model, state and batch");
  const BatchArrays& b = *in.batch;
  const int64_t rows = b.input_ids.numel(), slots = b.cu_seqlens.numel() - 1;
  require(t > 0 && t <= rows, "train: capacity " + std::to_string(t) + " must be in [1, " +
                                  std::to_string(rows) + "] (the batch arrays' rows)");
  const Kernels& k = kernels(t, slots);
  TrainState& s = *in.state;
  const Device device = b.input_ids.device();
  // A bucket of capacity T < rows reads the prefix [0, T) of the token rows.
  auto rows_of = [&](const Array& a) { return t == rows ? a : a.slice(0, 0, t); };
  const Value ids = r.param("input_ids", rows_of(b.input_ids));
  const Value labels = r.param("labels", rows_of(b.labels));
  const Value loss_mask = r.param("loss_mask", rows_of(b.loss_mask));
  const Value cu = r.param("cu_seqlens", b.cu_seqlens);
  const Value zero = r.param("zero", Array::from(std::vector<float>{0.0f}, {1}, device));
  const Value one = r.param("one", Array::from(std::vector<float>{1.0f}, {1}, device));
  const Value active =
      r.call(ragged::active_rows(), {cu, t}, CallOptions{{}, "active_rows"}).reshape({t, 1});

  std::vector<Value> p;
  for (std::size_t i = 0; i < s.params.size(); ++i)
    p.push_back(r.external(s.params[i], s.names[i]));
  if (param_values) *param_values = p;
  const int64_t d = config_.dim, h = config_.heads;
  std::size_t at = 0;
  Value x = k.embed->call(r, {{"table", p[at++]}, {"ids", ids}}, "embed").at("x");
  for (int64_t l = 0; l < config_.layers; ++l) {
    const std::string tag = "l" + std::to_string(l) + ".";
    auto block = r.scope("block" + std::to_string(l));
    std::map<std::string, Value> qkv = k.qkv->call(r,
                                                   {{"x", x},
                                                    {"g1", p[at]},
                                                    {"wq", p[at + 1]},
                                                    {"wk", p[at + 2]},
                                                    {"wv", p[at + 3]},
                                                    {"active", active},
                                                    {"zero", zero}},
                                                   tag + "qkv");
    const Shape thd = {t, h, d / h};
    const Value o = k.attention
                        ->call(r,
                               {{"q", qkv.at("q").reshape(thd)},
                                {"k", qkv.at("k").reshape(thd)},
                                {"v", qkv.at("v").reshape(thd)},
                                {"cu_seqlens", cu}},
                               tag + "attention")
                        .at("o");
    x = k.post
            ->call(r,
                   {{"x", x},
                    {"o", o.reshape({t, d})},
                    {"active", active},
                    {"zero", zero},
                    {"wo", p[at + 4]},
                    {"g2", p[at + 5]},
                    {"w1", p[at + 6]},
                    {"w2", p[at + 7]}},
                   tag + "block_out")
            .at("y");
    at += 8;
  }
  const Value loss = k.head
                         ->call(r,
                                {{"x", x},
                                 {"gf", p[at]},
                                 {"wh", p[at + 1]},
                                 {"labels", labels},
                                 {"loss_mask", loss_mask},
                                 {"one", one}},
                                "head")
                         .at("loss");
  return loss;
}

Value Model::record_loss(Recorder& r, const StepInputs& in, int64_t capacity,
                         std::vector<Value>* params) {
  return forward(r, in, capacity, params);
}

Value Model::record_step(Recorder& r, const StepInputs& in, int64_t capacity) {
  std::vector<Value> p;
  const Value loss = forward(r, in, capacity, &p);
  std::vector<Value> grads;
  {
    auto backward = r.scope("backward");
    grads = diff::gradients(r, {loss}, p);
  }
  if (in.average_gradients) {
    auto average = r.scope("gradient_average");
    grads = record_gradient_average(r, grads, *in.average_gradients);
  }
  auto optimizer = r.scope("optimizer");
  TrainState& s = *in.state;
  std::vector<Value> m, v;
  for (std::size_t i = 0; i < s.params.size(); ++i) {
    m.push_back(r.external(s.m[i], "m." + s.names[i]));
    v.push_back(r.external(s.v[i], "v." + s.names[i]));
  }
  record_adamw(r, r.external(s.count, "step_count"), p, grads, m, v, in.adamw);
  return loss;
}

std::vector<Value> record_gradient_average(Recorder& r, const std::vector<Value>& grads,
                                           const comm::Communicator& comm) {
  const Kernel average = comm::all_reduce(comm, comm::ReduceOp::avg);
  // The node that last wrote each gradient: the reverse pass finishes the last layers' first.
  const std::vector<NodeInfo>& nodes = r.recording().nodes();
  std::vector<std::pair<int, std::size_t>> ready;  // (last writer, gradient)
  for (std::size_t i = 0; i < grads.size(); ++i) {
    int writer = -1;
    for (int n = static_cast<int>(nodes.size()) - 1; n >= 0 && writer < 0; --n)
      for (const NodeArgInfo& a : nodes[static_cast<std::size_t>(n)].arrays)
        if (a.buffer == grads[i].buffer() && writes(a.access)) writer = n;
    ready.emplace_back(writer, i);
  }
  std::sort(ready.begin(), ready.end());
  std::vector<std::optional<Value>> averaged(grads.size());  // emplace: no Value::operator=
  for (const auto& [writer, i] : ready)
    averaged[i].emplace(
        r.call(average, {grads[i]}, CallOptions{{}, "all_reduce." + std::to_string(i)}));
  std::vector<Value> out;
  for (const auto& a : averaged) out.push_back(*a);
  return out;
}

void record_adamw(Recorder& r, const Value& count, const std::vector<Value>& params,
                  const std::vector<Value>& grads, const std::vector<Value>& m,
                  const std::vector<Value>& v, const AdamwConfig& c) {
  require(grads.size() == params.size() && m.size() == params.size() && v.size() == params.size(),
          "train: record_adamw needs one grad, m and v per param");
  r.call(kernels::step_count(), {count}, CallOptions{{}, "step_count"});
  const std::size_t group = kernels::kAdamwMaxTensors;
  for (std::size_t begin = 0; begin < params.size(); begin += group) {
    const std::size_t end = std::min(params.size(), begin + group);
    std::vector<Arg> args = {count};
    for (std::size_t i = begin; i < end; ++i) {
      args.emplace_back(params[i]);
      args.emplace_back(grads[i]);
      args.emplace_back(m[i]);
      args.emplace_back(v[i]);
    }
    for (double x : {c.lr, c.beta1, c.beta2, c.eps, c.weight_decay}) args.emplace_back(x);
    r.call_all(kernels::adamw(static_cast<int>(end - begin)), args,
               CallOptions{{}, "adamw." + std::to_string(begin / group)});
  }
}

}  // namespace eagle::train
