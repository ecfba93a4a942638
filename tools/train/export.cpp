// The training run's export for a peer (export.hpp).
#include "train/export.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>

#include "train/npy.hpp"
#include "util/json.hpp"

namespace eagle::train {

namespace {

std::string quoted(const std::string& s) {
  return detail::json_quote(s);  // eagle's one JSON string escape (src/util/json.hpp)
}

// Shortest text that reads back as the same double.
std::string number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

std::string shape_json(const Shape& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw Error("train --export: cannot write " + path.string());
}

std::string step_file(int64_t step, const std::string& field) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "batches/step_%05lld.%s.npy", static_cast<long long>(step),
                field.c_str());
  return buf;
}

// What the model computes, in words a peer implements literally (model.cpp, the op schemas and
// the reference engine's math, kernel/optim.hpp).
const char* const kSemantics[] = {
    "x = embed[input_ids]; embed [vocab, dim]",
    "rms_norm(x, g) = x / sqrt(mean(x^2 over the last dim) + rms_norm_eps) * g; no bias",
    "a projection is y = x @ W with W [in, out] (no transpose, no bias); with matmul_dtype "
    "bf16, y = (bf16(x) @ bf16(W)) rounded to bf16, then cast to f32",
    "L = cu_seqlens[N]; active rows are t < L; cu_seqlens's unused tail repeats L",
    "block l: h = rms_norm(x, l.g1); q, k, v = where(active, h @ l.wq|wk|wv, 0) (the where is "
    "also a gradient barrier: rows >= L pass no gradient to the projections)",
    "q, k, v viewed as [T, heads, head_dim] (head j = columns j*head_dim .. (j+1)*head_dim-1)",
    "attention: per sequence s (rows cu_seqlens[s] .. cu_seqlens[s+1]-1, empty ones have none), "
    "o = softmax(attention_scale * q k^T + causal mask) v, query i sees keys j <= i of its own "
    "sequence; q, k, v cast to attention_dtype, o cast back to f32",
    "x1 = x + where(active, o, 0).reshape(T, dim) @ l.wo",
    "x = x1 + silu(rms_norm(x1, l.g2) @ l.w1) @ l.w2; silu(z) = z * sigmoid(z)",
    "logits = rms_norm(x, gf) @ head; head [dim, vocab] is its own param (not tied to embed)",
    "ce_t = logsumexp(logits_t) - logits_t[labels_t], 0 where labels_t == -100",
    "loss = sum_t(ce_t * loss_mask_t) / max(sum_t(loss_mask_t), 1); loss_mask is 0 wherever "
    "labels is -100 and on every row >= L",
    "the loss logged for step s is computed before step s's update",
    "rows >= L run through the token-parallel ops but pass no gradient (loss mask 0); a bucket "
    "of capacity T_b < T computes rows 0 .. T_b-1 only: the same loss and gradients",
    "AdamW on every param (weight decay included on gains and embed), step counter t = 1 at "
    "step 1: p *= 1 - lr * weight_decay; m = beta1 m + (1 - beta1) g; v = beta2 v + "
    "(1 - beta2) g^2; p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps) "
    "(torch.optim.AdamW's update, amsgrad off); f32 params and moments",
};

}  // namespace

std::string export_config_json(const TrainOptions& o, const TrainState& state) {
  const ModelConfig& m = o.model;
  const int64_t head_dim = m.dim / m.heads;
  std::string j = "{\n  \"format\": \"eagle-train-export/1\",\n";
  j += "  \"model\": {\"vocab\": " + std::to_string(m.vocab) +
       ", \"dim\": " + std::to_string(m.dim) + ", \"heads\": " + std::to_string(m.heads) +
       ", \"head_dim\": " + std::to_string(head_dim) + ", \"layers\": " + std::to_string(m.layers) +
       ", \"mlp\": " + std::to_string(m.mlp_width()) +
       ", \"attention_dtype\": " + quoted(std::string(dtype_name(m.attention_dtype))) +
       ", \"matmul_dtype\": " + quoted(std::string(dtype_name(m.matmul_dtype))) +
       ", \"rms_norm_eps\": 1e-05" +
       ", \"attention_scale\": " + number(1.0 / std::sqrt(static_cast<double>(head_dim))) +
       ", \"causal\": true, \"tied_head\": false, \"ignore_index\": -100},\n";
  j += "  \"adamw\": {\"lr\": " + number(o.adamw.lr) + ", \"beta1\": " + number(o.adamw.beta1) +
       ", \"beta2\": " + number(o.adamw.beta2) + ", \"eps\": " + number(o.adamw.eps) +
       ", \"weight_decay\": " + number(o.adamw.weight_decay) + "},\n";
  j += "  \"capacity\": {\"tokens\": " + std::to_string(o.capacity.tokens) +
       ", \"slots\": " + std::to_string(o.capacity.slots) + "},\n";
  std::string buckets;
  for (int64_t b : o.buckets) buckets += (buckets.empty() ? "" : ", ") + std::to_string(b);
  j += "  \"buckets\": [" + buckets + "],\n";
  j += "  \"steps\": " + std::to_string(o.steps) + ",\n  \"seed\": " + std::to_string(o.seed) +
       ",\n  \"device\": " + quoted(o.device.str()) + ",\n";
  j += "  \"params\": [\n";
  for (std::size_t i = 0; i < state.params.size(); ++i)
    j += "    {\"name\": " + quoted(state.names[i]) +
         ", \"file\": " + quoted("params/" + state.names[i] + ".npy") +
         ", \"shape\": " + shape_json(state.params[i].shape()) + "}" +
         (i + 1 < state.params.size() ? ",\n" : "\n");
  j += "  ],\n";
  j += "  \"batch_files\": \"batches/step_NNNNN.FIELD.npy for FIELD in input_ids [T] i32, labels "
       "[T] i32, loss_mask [T] f32, cu_seqlens [N+1] i32; NNNNN = the 1-based step\",\n";
  j += "  \"semantics\": [\n";
  const std::size_t n = std::size(kSemantics);
  for (std::size_t i = 0; i < n; ++i)
    j += "    " + quoted(kSemantics[i]) + (i + 1 < n ? ",\n" : "\n");
  j += "  ]\n}\n";
  return j;
}

RunExport::RunExport(std::filesystem::path dir, const TrainOptions& o, const TrainState& state)
    : dir_(std::move(dir)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_ / "params", ec);
  if (!ec) std::filesystem::create_directories(dir_ / "batches", ec);
  if (ec) throw Error("train --export: cannot create " + dir_.string() + ": " + ec.message());
  write_text(dir_ / "config.json", export_config_json(o, state));
  for (std::size_t i = 0; i < state.params.size(); ++i)
    write_npy(dir_ / "params" / (state.names[i] + ".npy"), state.params[i].to_vector<float>(),
              state.params[i].shape());
}

void RunExport::batch(int64_t step, const data::PackedBatch& b) const {
  const int64_t t = b.capacity.tokens, n = b.capacity.slots;
  write_npy(dir_ / step_file(step, "input_ids"), b.input_ids, {t});
  write_npy(dir_ / step_file(step, "labels"), b.labels, {t});
  write_npy(dir_ / step_file(step, "loss_mask"), b.loss_mask, {t});
  write_npy(dir_ / step_file(step, "cu_seqlens"), b.cu_seqlens, {n + 1});
}

void RunExport::finish(const TrainReport& r) const {
  auto list = [&r](auto field) {
    std::string out = "[";
    for (std::size_t i = 0; i < r.steps.size(); ++i)
      out += (i ? ", " : "") + number(static_cast<double>(r.steps[i].*field));
    return out + "]";
  };
  std::string j = "{\n";
  j += "  \"steps\": " + std::to_string(r.steps.size()) + ",\n";
  j += "  \"loss\": " + list(&StepLog::loss) + ",\n";
  j += "  \"step_seconds\": " + list(&StepLog::seconds) + ",\n";
  j += "  \"launch_seconds\": " + list(&StepLog::launch_seconds) + ",\n";
  j += "  \"pack_seconds\": " + list(&StepLog::pack_seconds) + ",\n";
  j += "  \"bucket_tokens\": " + list(&StepLog::capacity) + ",\n";
  j += "  \"active_tokens\": " + list(&StepLog::active_tokens) + ",\n";
  j += "  \"sequences\": " + list(&StepLog::sequences) + ",\n";
  j += "  \"loss_tokens\": " + list(&StepLog::loss_tokens) + ",\n";
  j += "  \"step_seconds_note\": \"step_seconds: the wall time of a step: the batch copy, "
       "Graph::launch, the wait "
       "and the loss read (the next batch is packed during the wait: pack_seconds); step 1 "
       "includes first-touch costs\"\n}\n";
  write_text(dir_ / "log.json", j);
}

}  // namespace eagle::train
