// `eagle train`: the command line of the training job (tools/train/trainer.hpp).
#include "train/train_command.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>

#include "train/plans.hpp"
#include "train/trainer.hpp"

namespace eagle::tools {

namespace {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

int64_t integer(const std::string& option, const std::string& text, int64_t min) {
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < min)
    throw UsageError(option + " must be an integer >= " + std::to_string(min) + ", got '" + text +
                     "'");
  return v;
}

// "64,128": integers >= 2 separated by commas.
std::vector<int64_t> integer_list(const std::string& option, const std::string& text) {
  std::vector<int64_t> out;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    out.push_back(integer(option, text.substr(at, comma - at), 2));
    at = comma + 1;
  }
  return out;
}

double real(const std::string& option, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v > 0))
    throw UsageError(option + " must be a positive number, got '" + text + "'");
  return v;
}

// The Python standard library's sources (a real corpus most machines carry), else eagle's own.
std::filesystem::path default_docs() {
  std::vector<std::filesystem::path> found;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/usr/lib", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("python3.", 0) == 0 && e.is_directory(ec)) found.push_back(e.path());
  }
  if (!found.empty()) return *std::max_element(found.begin(), found.end());
  return std::filesystem::path(EAGLE_TOOLS_DIR) / ".." / "src";
}

Device device_of(const std::string& v) {
  try {
    return Device::parse(v);
  } catch (const InvalidArgument&) {
    throw UsageError("--device must be cpu or cuda[:N], got '" + v + "'");
  }
}

// --attention-dtype and --matmul-dtype: f32 or bf16.
DType float_dtype_of(const std::string& a, const std::string& v) {
  if (v != "f32" && v != "bf16") throw UsageError(a + " must be f32 or bf16, got '" + v + "'");
  return v == "bf16" ? DType::bf16 : DType::f32;
}

// Each option and what it sets (`a` is the option's name, for messages).
using Setter = void (*)(train::TrainOptions& o, const std::string& a, const std::string& v);
const std::map<std::string, Setter>& setters() {
  using O = train::TrainOptions;
  using S = const std::string&;
  static const std::map<std::string, Setter> m = {
      {"--device", [](O& o, S, S v) { o.device = device_of(v); }},
      {"--gpus", [](O& o, S a, S v) { o.ranks = static_cast<int>(integer(a, v, 1)); }},
      {"--ranks", [](O& o, S a, S v) { o.ranks = static_cast<int>(integer(a, v, 1)); }},
      {"--steps", [](O& o, S a, S v) { o.steps = integer(a, v, 1); }},
      {"--tokens", [](O& o, S a, S v) { o.capacity.tokens = integer(a, v, 2); }},
      {"--slots", [](O& o, S a, S v) { o.capacity.slots = integer(a, v, 1); }},
      {"--lookahead", [](O& o, S a, S v) { o.lookahead = integer(a, v, 1); }},
      {"--segment-cap", [](O& o, S a, S v) { o.segment_cap = integer(a, v, 1); }},
      {"--fill", [](O& o, S a, S v) { o.fill = integer(a, v, 1); }},
      {"--layers", [](O& o, S a, S v) { o.model.layers = integer(a, v, 1); }},
      {"--dim", [](O& o, S a, S v) { o.model.dim = integer(a, v, 1); }},
      {"--heads", [](O& o, S a, S v) { o.model.heads = integer(a, v, 1); }},
      {"--attention-dtype", [](O& o, S a, S v) { o.model.attention_dtype = float_dtype_of(a, v); }},
      {"--matmul-dtype", [](O& o, S a, S v) { o.model.matmul_dtype = float_dtype_of(a, v); }},
      {"--docs", [](O& o, S, S v) { o.docs = v; }},
      {"--max-tokens", [](O& o, S a, S v) { o.max_tokens = integer(a, v, 1); }},
      {"--seed", [](O& o, S a, S v) { o.seed = static_cast<uint64_t>(integer(a, v, 0)); }},
      {"--lr", [](O& o, S a, S v) { o.adamw.lr = real(a, v); }},
      {"--threads", [](O& o, S a, S v) { o.threads = static_cast<int>(integer(a, v, 0)); }},
      {"--trace", [](O& o, S, S v) { o.trace = v; }},
      {"--plans", [](O& o, S, S v) { o.plans = v; }},
      {"--buckets", [](O& o, S a, S v) { o.buckets = integer_list(a, v); }},
      {"--export", [](O& o, S, S v) { o.export_dir = v; }},
      // Byte tokens: a larger vocabulary only widens the embedding and the LM head.
      {"--vocab", [](O& o, S a, S v) { o.model.vocab = integer(a, v, data::kByteVocabulary); }},
  };
  return m;
}

// Data parallelism: --gpus K puts rank r on cuda:(d + r) (d from --device, default 0), --ranks K
// runs K thread ranks on the CPU; each picks its device when --device is not given.
void check_ranks(train::TrainOptions& o, const std::set<std::string>& given) {
  const bool gpus = given.count("--gpus") > 0, ranks = given.count("--ranks") > 0;
  const bool device = given.count("--device") > 0;
  if (gpus && ranks)
    throw UsageError("--gpus (GPU ranks) and --ranks (CPU thread ranks) exclude each other");
  if (gpus) {
    if (!device) o.device = Device::cuda(0);
    if (o.device.is_cpu())
      throw UsageError("--gpus needs a GPU device; on --device cpu use --ranks K for thread ranks");
    const int count = cuda_device_count();
    if (o.device.ordinal() + o.ranks > count)
      throw UsageError(
          "--gpus " + std::to_string(o.ranks) + " from " + o.device.str() +
          " needs GPUs up to cuda:" + std::to_string(o.device.ordinal() + o.ranks - 1) + ", but " +
          std::to_string(count) + " are visible");
  }
  if (ranks) {
    if (!device) o.device = Device::cpu();
    if (o.device.is_cuda())
      throw UsageError("--ranks runs thread ranks on --device cpu; on GPUs use --gpus K");
  }
}

train::TrainOptions parse(const std::vector<std::string>& args) {
  train::TrainOptions o;
  o.device = cuda_available() ? Device::cuda(0) : Device::cpu();
  std::set<std::string> given;
  for (std::size_t i = 0; i < args.size(); i += 2) {  // option, value
    const auto it = setters().find(args[i]);
    if (it == setters().end()) throw UsageError("unknown option '" + args[i] + "'");
    if (i + 1 >= args.size()) throw UsageError(args[i] + " needs a value");
    it->second(o, args[i], args[i + 1]);
    given.insert(args[i]);
  }
  check_ranks(o, given);
  // A GPU gets a larger model by default, shaped for its attention kernels (bf16, head dim 64).
  if (o.device.is_cuda()) {
    if (!given.count("--tokens")) o.capacity.tokens = 4096;
    if (!given.count("--slots")) o.capacity.slots = 32;
    if (!given.count("--dim")) o.model.dim = 512;
    if (!given.count("--heads")) o.model.heads = 8;
    if (!given.count("--attention-dtype")) o.model.attention_dtype = DType::bf16;
  }
  if (o.model.dim % o.model.heads != 0)
    throw UsageError("--dim (" + std::to_string(o.model.dim) + ") must be a multiple of --heads (" +
                     std::to_string(o.model.heads) + ")");
  if (o.fill > o.capacity.tokens) throw UsageError("--fill must not exceed --tokens");
  if (o.segment_cap > o.capacity.tokens) throw UsageError("--segment-cap must not exceed --tokens");
  if (o.fill > 0 && o.segment_cap > o.fill)
    throw UsageError("--segment-cap must not exceed --fill: a paragraph that long would not fit");
  if (o.docs.empty()) o.docs = default_docs();
  return o;
}

// The mean of `field` over steps [skip, size - drop_last).
double mean(const std::vector<train::StepLog>& steps, double train::StepLog::*field,
            std::size_t skip, std::size_t drop_last = 0) {
  double sum = 0;
  std::size_t n = 0;
  const std::size_t end = steps.size() - std::min(drop_last, steps.size());
  for (std::size_t i = skip; i < end; ++i, ++n) sum += steps[i].*field;
  return n ? sum / static_cast<double>(n) : 0.0;
}

// "2 ranks on cpu (in-process group)" or "2 ranks on cuda:0..cuda:1 (NCCL)".
std::string ranks_text(const train::TrainOptions& o) {
  const std::string k = std::to_string(o.ranks) + " ranks on ";
  if (o.device.is_cpu()) return k + "cpu (in-process group)";
  return k + o.device.str() + "..cuda:" + std::to_string(o.device.ordinal() + o.ranks - 1) +
         " (NCCL)";
}

// The ranks' params at the end: 0 when they match (train::params_match), else 1.
int check_rank_params(const train::TrainReport& r) {
  const bool ok = train::params_match(r);
  std::printf("  params across %d ranks (%s): %s, max difference %.3g%s\n", r.ranks,
              r.rank_kind.c_str(),
              r.params_bitwise_equal ? "bitwise identical" : "not bitwise identical",
              r.max_param_difference, ok ? "" : ": MISMATCH");
  if (!ok)
    std::fprintf(stderr, "eagle train: the ranks' params differ at the end (max difference %g)\n",
                 r.max_param_difference);
  return ok ? 0 : 1;
}

}  // namespace

void train_usage(std::FILE* to) {
  std::fprintf(
      to,
      "usage: eagle train [options]\n"
      "  trains a small transformer (embedding, L blocks of rms_norm, causal varlen attention\n"
      "  and MLP, LM head, cross entropy over the loss mask) on look-ahead packed batches of\n"
      "  real documents (byte tokens); each step (forward, reverse, AdamW) is one recorded\n"
      "  graph launch. Prints a line per step and a summary.\n"
      "  --device cpu|cuda[:N]  where to run (default: cuda:0 when a GPU is present, else cpu)\n"
      "  --gpus K               data parallel over K GPUs (cuda:0..K-1, or from --device\n"
      "                         cuda:N), NCCL: each rank its own batches, gradients averaged\n"
      "                         in the step graph (not yet run on GPUs)\n"
      "  --ranks K              the same with K thread ranks on --device cpu (in-process\n"
      "                         group; --threads is then per rank, default a K-th of the CPU)\n"
      "  --steps N              training steps (default 200)\n"
      "  --tokens T             token capacity of a batch (default 256; on a GPU 4096)\n"
      "  --slots N              sequence slots of a batch (default 16; on a GPU 32)\n"
      "  --lookahead B          candidate segments the packer chooses from (default 32)\n"
      "  --segment-cap S        documents are split into paragraphs (at blank lines) of at\n"
      "                         most S tokens (default F / 4)\n"
      "  --fill F               pack at most F <= T tokens per batch (default T), e.g. to time\n"
      "                         a bucket against the worst-case graph on the same batches\n"
      "  --layers L             transformer blocks (default 2)\n"
      "  --dim D                model width (default 64; on a GPU 512)\n"
      "  --heads H              attention heads, dividing D (default 4; on a GPU 8)\n"
      "  --attention-dtype f32|bf16  what attention computes in (default f32; on a GPU bf16)\n"
      "  --matmul-dtype f32|bf16     what the projections multiply in (default f32)\n"
      "  --buckets LIST         also record graphs for these capacities below T (e.g. 64,128):\n"
      "                         each step runs the smallest T_b >= L, all share one arena\n"
      "  --plans FILE           write each planned op's plan list (forward, recompute and\n"
      "                         backward segments) with the chosen entry, then stop ( - : stdout)\n"
      "  --trace FILE           write every step's nodes as trace-event JSON with their labels\n"
      "                         and scopes (on a GPU through CUPTI)\n"
      "  --vocab V              rows of the embedding and LM head, >= 256 (the tokens are\n"
      "                         bytes; default 256)\n"
      "  --export DIR           write the run for a peer (bench/peers/train_step.py): config,\n"
      "                         initial params, every step's batch (.npy), losses and times\n"
      "  --docs DIR             text to train on (default: the Python standard library under\n"
      "                         /usr/lib/python3.*, else eagle's own src/)\n"
      "  --max-tokens N         read at most N bytes of the corpus (default 4000000)\n"
      "  --seed N               initial weights (default 1)\n"
      "  --lr X                 AdamW learning rate (default 0.003)\n"
      "  --threads N            CPU thread team size (default 0: one per hardware thread)\n");
}

// --plans: every planned op's plan list on the chosen device; 1 when a segment has no engine.
int plans(const train::TrainOptions& o) {
  std::FILE* to = o.plans == "-" ? stdout : std::fopen(o.plans.c_str(), "w");
  if (!to) {
    std::fprintf(stderr, "eagle train: cannot write '%s'\n", o.plans.c_str());
    return 1;
  }
  int unserved = 0;
  try {
    unserved = train::print_plans(o.model, o.capacity.tokens, o.capacity.slots, o.device, to);
  } catch (const Error& e) {
    std::fprintf(stderr, "eagle train: %s\n", e.what());
    unserved = -1;
  }
  if (to != stdout) std::fclose(to);
  if (unserved > 0)
    std::fprintf(stderr, "eagle train: %d planned segments have no engine on %s\n", unserved,
                 o.device.str().c_str());
  else if (unserved == 0 && to != stdout)
    std::printf("plans: written to %s\n", o.plans.c_str());
  return unserved == 0 ? 0 : 1;
}

int run_train(const std::vector<std::string>& args) {
  train::TrainOptions o;
  try {
    o = parse(args);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "eagle train: %s\n", e.what());
    train_usage(stderr);
    return 2;
  }
  std::printf("eagle train: %lld layers, dim %lld, %lld heads, vocab %lld (bytes) on %s\n",
              static_cast<long long>(o.model.layers), static_cast<long long>(o.model.dim),
              static_cast<long long>(o.model.heads), static_cast<long long>(o.model.vocab),
              o.ranks > 1 ? ranks_text(o).c_str() : o.device.str().c_str());
  std::printf("  batches: T=%lld tokens, N=%lld slots, look-ahead B=%lld; corpus %s\n",
              static_cast<long long>(o.capacity.tokens), static_cast<long long>(o.capacity.slots),
              static_cast<long long>(o.lookahead), o.docs.string().c_str());
  if (o.ranks > 1)
    std::printf(
        "  data parallel: each rank packs its own shard of the segments; gradients averaged in "
        "the step graph; loss: the mean of the ranks' losses; tokens/s, fill, M: all ranks\n");
  std::fflush(stdout);
  if (!o.plans.empty()) return plans(o);
  const auto ready = [&](const train::TrainReport& r) {
    std::printf("  corpus: %lld files, %lld bytes, %lld segments; %lld params\n",
                static_cast<long long>(r.corpus.files), static_cast<long long>(r.corpus.tokens),
                static_cast<long long>(r.segments), static_cast<long long>(r.params));
    std::printf(
        "  step graph: %lld recorded nodes (forward, reverse, AdamW), %d built nodes, %.1f MiB; "
        "recorded and built in %.1f ms\n",
        static_cast<long long>(r.graph_nodes), r.native_nodes,
        static_cast<double>(r.graph_bytes) / (1 << 20), r.record_seconds * 1e3);
    if (r.capacities.size() > 1) {
      std::string list;
      for (int64_t c : r.capacities) list += (list.empty() ? "" : ",") + std::to_string(c);
      std::printf(
          "  buckets: T = %s, one graph each, sharing an arena of %.1f MiB: %.3fx the largest "
          "bucket's graph built alone (%.1f MiB)\n",
          list.c_str(), static_cast<double>(r.set_bytes) / (1 << 20),
          static_cast<double>(r.set_bytes) /
              static_cast<double>(std::max<std::size_t>(1, r.alone_bytes)),
          static_cast<double>(r.alone_bytes) / (1 << 20));
    }
    std::fflush(stdout);
  };
  const auto step = [&](const train::StepLog& s) {
    std::printf("step %4lld  loss %.4f  %9.0f tokens/s  fill %lld/%lld  M %lld  %.2f ms\n",
                static_cast<long long>(s.step), s.loss,
                static_cast<double>(s.active_tokens) / s.seconds,
                static_cast<long long>(s.active_tokens), static_cast<long long>(s.capacity),
                static_cast<long long>(s.sequences), s.seconds * 1e3);
    std::fflush(stdout);
  };
  const train::TrainReport r = train::run_training(o, ready, step);
  // Step 1 includes first-touch costs (plans, caches): means skip it when there are others.
  const std::size_t skip = r.steps.size() > 1 ? 1 : 0;
  double fill = 0;
  for (const auto& s : r.steps) fill += static_cast<double>(s.active_tokens);
  fill /= static_cast<double>(r.steps.size()) * static_cast<double>(o.capacity.tokens * o.ranks);
  // Single-batch losses are noisy: also the means of the first and last ten steps.
  const std::size_t n = r.steps.size(), k = std::min<std::size_t>(10, n);
  double head = 0, tail = 0;
  for (std::size_t i = 0; i < k; ++i) {
    head += r.steps[i].loss / static_cast<double>(k);
    tail += r.steps[n - k + i].loss / static_cast<double>(k);
  }
  std::printf(
      "summary: loss %.4f -> %.4f over %zu steps (mean of the first %zu %.4f, of the last "
      "%zu %.4f)\n",
      r.steps.front().loss, r.steps.back().loss, n, k, head, k, tail);
  std::printf(
      "  mean step %.2f ms, host time in Graph::launch %.3f ms per replay (steps 2..; on "
      "the CPU the host schedule runs the whole step inside launch), mean fill %.1f%%\n",
      mean(r.steps, &train::StepLog::seconds, skip) * 1e3,
      mean(r.steps, &train::StepLog::launch_seconds, skip) * 1e3, fill * 100);
  // The last step has no next batch to pack.
  std::printf("  packing the next batch: %.3f ms per step, on the host while the step runs\n",
              mean(r.steps, &train::StepLog::pack_seconds, skip, 1) * 1e3);
  if (!o.export_dir.empty()) std::printf("export: written to %s\n", o.export_dir.c_str());
  return r.ranks > 1 ? check_rank_params(r) : 0;
}

}  // namespace eagle::tools
