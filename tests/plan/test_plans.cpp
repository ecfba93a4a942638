// The dispatch contract end to end on the CPU, with stand-in engines injected through a test
// manifest family (the path production engines take): classification, engine ids, the opt-in
// gate, facts, the heuristics hook and the one plan list, build_plans / select_plan / the
// at-index APIs, one-shot planning, create_for, the variant pack, the per-call check and
// concurrent execution of one plan. The stand-ins do no arithmetic: their plans copy the input
// operand's bytes into the output operand and record which engine ran.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "eagle/plan/autotune.hpp"
#include "eagle/plan/manifest.hpp"
#include "eagle/plan/operand_rules.hpp"
#include "eagle/plan/plans.hpp"
#include "test_util.hpp"

namespace eagle::test {
namespace {

using plan::Capabilities;
using plan::CompiledPlan;
using plan::EngineFamily;
using plan::EngineSlot;
using plan::ExecutionContext;
using plan::ExecutionPlans;
using plan::Facts;
using plan::HeurMode;
using plan::Knobs;
using plan::Manifest;
using plan::ManifestSpec;
using plan::Operand;
using plan::OperandBuffer;
using plan::PlanConfig;
using plan::RankInput;
using plan::VariantPack;

constexpr const char* kOptInVar = "EAGLE_ENABLE_OPT_IN_ENGINES";
constexpr int64_t kN = 1000;

// ---- Recording state shared by the stand-ins (reset by every fixture)

struct Record {
  std::mutex mutex;
  std::map<std::string, int> checks;  // check_support calls by engine name
  std::vector<PlanConfig> builds;     // every build_plan / backend build, in order
  int analyzer_calls = 0;
  int analyzer_saw_unfrozen = 0;
  int facts_not_shared = 0;  // an engine's facts_for() gave another record than it was handed
  std::atomic<int64_t> last_ran{-1};
  std::atomic<int> runs{0};
  std::atomic<bool> run_without_workspace{false};  // a plan asking workspace ran with too little

  void reset() {
    std::lock_guard<std::mutex> lock(mutex);
    checks.clear();
    builds.clear();
    analyzer_calls = 0;
    analyzer_saw_unfrozen = 0;
    facts_not_shared = 0;
    last_ran = -1;
    runs = 0;
    run_without_workspace = false;
  }
};
Record& rec() {
  static Record r;
  return r;
}

// ---- Facts and the analyzer of the stand-in family

struct StandInFacts : Facts {
  int64_t elements = 0;  // of the first graph input
  std::string describe() const override {
    return Facts::describe() + ", " + std::to_string(elements) + " elements";
  }
};

std::shared_ptr<const Facts> standin_analyzer(const op::Graph& graph) {
  {
    std::lock_guard<std::mutex> lock(rec().mutex);
    ++rec().analyzer_calls;
    if (!graph.frozen()) ++rec().analyzer_saw_unfrozen;
  }
  auto f = std::make_shared<StandInFacts>();
  plan::describe_graph(graph, *f);
  for (const op::Tensor& t : graph.tensors())
    if (t.producer() < 0) {
      f->elements = 1;
      for (int64_t d : t.dims()) f->elements *= d;
      break;
    }
  return f;
}

// ---- The stand-in plan: copies the graph's first input into its first output, nothing else

class CopyPlan : public CompiledPlan {
 public:
  CopyPlan(const op::Graph& graph, const plan::BuildContext& ctx, int64_t engine_id,
           std::size_t workspace, bool silent)
      : engine_id_(engine_id), workspace_(workspace), silent_(silent) {
    op::Tensor in, out;
    for (const op::Tensor& t : graph.tensors()) {
      if (t.producer() < 0 && !in.defined()) in = t;
      if (t.producer() >= 0 && !t.is_virtual() && !out.defined()) out = t;
    }
    if (!in.defined() || !out.defined() || in.dtype() != out.dtype() || in.dims() != out.dims())
      throw NotSupported("copy plan: the graph is not a copy");
    rules_.add(*ctx.layout, in, Device::cpu(), /*row_major=*/true);
    rules_.add(*ctx.layout, out, Device::cpu(), /*row_major=*/true);
    in_ = rules_.position_of(in);
    out_ = rules_.position_of(out);
    bytes_ = itemsize(in.dtype());
    for (int64_t d : in.dims()) bytes_ *= static_cast<std::size_t>(d);
  }
  std::size_t workspace_bytes() const override { return workspace_; }
  bool run(const OperandBuffer* operands, const ExecutionContext& ctx) const noexcept override {
    if (silent_ || !rules_.match(operands)) return false;
    if (workspace_ && (!ctx.workspace || ctx.workspace_bytes < workspace_))
      rec().run_without_workspace = true;
    // A plan asking more workspace takes longer (4 us a byte: gaps of 0.5 ms and more, wider
    // than a loaded machine's sleep overshoot): autotune has a fastest entry to find.
    std::this_thread::sleep_for(std::chrono::microseconds(4 * workspace_));
    std::memcpy(operands[out_].data, operands[in_].data, bytes_);
    rec().last_ran.store(engine_id_);
    ++rec().runs;
    return true;
  }
  void explain(const OperandBuffer* operands, const ExecutionContext&) const override {
    if (!silent_) rules_.explain(operands);
  }

 private:
  int64_t engine_id_;
  std::size_t workspace_;
  bool silent_;
  plan::OperandRules rules_;
  int in_ = -1, out_ = -1;
  std::size_t bytes_ = 0;
};

// ---- Stand-in engines, one behavior per slot name

struct Behavior {
  Capabilities caps;
  std::string decline_check = {};  // check_support declines with this
  std::string decline_build = {};  // build_plan declines with this
  bool bug = false;                // check_support throws something that is not a decline
  bool silent = false;             // its plan refuses every call and its checker names nothing
};

Capabilities cpu_caps(std::vector<DType> dtypes,
                      std::map<std::string, std::vector<int64_t>> k = {}) {
  Capabilities c;
  c.device = DeviceKind::cpu;
  c.dtypes = std::move(dtypes);
  c.knobs = std::move(k);
  return c;
}

const Behavior& behavior(const std::string& name) {
  static const std::map<std::string, Behavior> table = [] {
    const std::vector<DType> f32_f64 = {DType::f32, DType::f64};
    std::map<std::string, Behavior> t;
    t["copy"] = {cpu_caps(f32_f64)};
    // tile 2 (last: not the first point) asks 4 bytes of workspace, a scalar's size.
    t["tiled"] = {cpu_caps(f32_f64, {{"tile", {64, 128, 256, 2}}, {"stages", {2, 3}}})};
    t["optin"] = {cpu_caps(f32_f64)};
    t["declines_check"] = {cpu_caps(f32_f64), "declines_check: this graph is not mine"};
    t["declines_build"] = {cpu_caps(f32_f64), "", "declines_build: no kernel for this shape"};
    t["f16_only"] = {cpu_caps({DType::f16})};
    Capabilities cuda = cpu_caps(f32_f64);
    cuda.device = DeviceKind::cuda;
    cuda.sm_lo = 80;
    cuda.sm_hi = 89;
    t["cuda_only"] = {cuda};
    t["buggy"] = {cpu_caps(f32_f64), "", "", true};
    t["silent"] = {cpu_caps(f32_f64), "", "", false, true};
    return t;
  }();
  return table.at(name);
}

class StandInEngine : public plan::Engine {
 public:
  StandInEngine(int64_t id, const std::string& name) : Engine(id, name), b_(behavior(name)) {}
  const Capabilities& capabilities() const override { return b_.caps; }
  void check_support(const op::Graph& graph, const Facts& facts,
                     const DeviceProperties&) const override {
    {
      std::lock_guard<std::mutex> lock(rec().mutex);
      ++rec().checks[name()];
    }
    // An engine reads the one record planning attached; asking for it again analyzes nothing.
    if (dynamic_cast<const StandInFacts*>(&facts) &&
        plan::facts_for(graph, &standin_analyzer).get() != &facts) {
      std::lock_guard<std::mutex> lock(rec().mutex);
      ++rec().facts_not_shared;
    }
    if (b_.bug) throw std::runtime_error(name() + ": a bug, not a decline");
    if (!b_.decline_check.empty()) throw NotSupported(b_.decline_check);
  }
  std::shared_ptr<const CompiledPlan> build_plan(const op::Graph& graph, const Facts&,
                                                 const PlanConfig& config,
                                                 const plan::BuildContext& ctx) const override {
    {
      std::lock_guard<std::mutex> lock(rec().mutex);
      rec().builds.push_back(config);
    }
    if (!b_.decline_build.empty()) throw NotSupported(b_.decline_build);
    std::size_t ws = 0;
    if (config.knobs.count("tile"))
      ws = static_cast<std::size_t>(config.knobs.at("tile") * config.knobs.at("stages"));
    return std::make_shared<CopyPlan>(graph, ctx, id(), ws, b_.silent);
  }

 private:
  Behavior b_;
};

std::unique_ptr<plan::Engine> make_standin(int64_t id, const std::string& name) {
  return std::make_unique<StandInEngine>(id, name);
}
std::unique_ptr<plan::Engine> make_with_other_id(int64_t id, const std::string& name) {
  return std::make_unique<StandInEngine>(id + 1, name);
}
std::unique_ptr<plan::Engine> make_nothing(int64_t, const std::string&) {
  return nullptr;
}

EngineSlot slot(const std::string& name, bool opt_in = false) {
  return {name, &make_standin, opt_in};
}

// ---- The stand-in backend: tagged entries per mode, a delegating entry, plans it builds

class StandInBackend : public plan::Backend {
 public:
  std::map<HeurMode, std::vector<int64_t>> entries_by_mode = {{HeurMode::A, {101, 102}},
                                                              {HeurMode::FALLBACK, {201}}};
  std::set<HeurMode> declined_modes;
  std::set<int64_t> declined_builds;
  bool delegating = true;
  mutable std::vector<HeurMode> asked;

  std::string name() const override { return "vendor"; }
  std::vector<PlanConfig> entries(const op::Graph&, HeurMode mode,
                                  const DeviceProperties&) const override {
    asked.push_back(mode);
    if (declined_modes.count(mode)) throw NotSupported("vendor: declines this mode");
    std::vector<PlanConfig> out;
    auto it = entries_by_mode.find(mode);
    if (it != entries_by_mode.end())
      for (int64_t id : it->second) out.push_back({id, {}, std::nullopt, ""});  // untagged
    return out;
  }
  bool delegates(const op::Graph&) const override { return delegating; }
  std::shared_ptr<const CompiledPlan> build(const op::Graph& graph, const PlanConfig& config,
                                            const plan::BuildContext& ctx) const override {
    {
      std::lock_guard<std::mutex> lock(rec().mutex);
      rec().builds.push_back(config);
    }
    if (declined_builds.count(config.engine_id))
      throw NotSupported("vendor: engine " + std::to_string(config.engine_id) + " declines");
    return std::make_shared<CopyPlan>(graph, ctx, config.engine_id, 0, false);
  }
};

// ---- The heuristics hook of the stand-in family: records what it is handed and returns what
// the test asks for (unranked when the test asks nothing).

struct Seen {
  int calls = 0;
  std::vector<HeurMode> modes;
  const Facts* facts = nullptr;
  const DeviceProperties* device = nullptr;
  std::vector<int64_t> offered;
  std::vector<PlanConfig> backend;
};
Seen g_seen;
std::function<std::vector<PlanConfig>(const RankInput&)> g_rank;

std::vector<PlanConfig> recording_hook(const RankInput& in) {
  ++g_seen.calls;
  g_seen.modes = in.modes;
  g_seen.facts = in.facts;
  g_seen.device = in.device;
  g_seen.offered.clear();
  for (const plan::Engine* e : in.offered) g_seen.offered.push_back(e->id());
  g_seen.backend = in.backend;
  return g_rank ? g_rank(in) : plan::unranked(in);
}

// The copy family (anchor "identity", block 3) holds these slots; ids 20300 + slot.
enum Slot : int {
  kCopy = 0,
  kTiled,
  kOptIn,
  kDeclinesCheck,
  kDeclinesBuild,
  kF16Only,
  kCudaOnly,
  kBuggy,
  kSilent,
};
constexpr int64_t id_of(int s) {
  return plan::kOwnIdBegin + 3 * plan::kFamilyBlock + s;
}

std::vector<EngineSlot> copy_slots() {
  return {slot("copy"),           slot("tiled"),          slot("optin", true),
          slot("declines_check"), slot("declines_build"), slot("f16_only"),
          slot("cuda_only"),      slot("buggy"),          slot("silent")};
}

// rest (unanchored, block 0), copy (anchor identity, block 3, with the analyzer and the hook
// when asked), other (anchor neg, block 5), mixed (block 7).
ManifestSpec test_spec(plan::Heuristics hook = &recording_hook,
                       std::shared_ptr<const plan::Backend> backend = nullptr) {
  ManifestSpec spec;
  spec.families = {
      {"rest", 0, {}, nullptr, nullptr, {slot("copy")}},
      {"copy", 3, {"identity"}, &standin_analyzer, hook, copy_slots()},
      {"other", 5, {"neg"}, nullptr, nullptr, {slot("copy"), slot("tiled")}},
      {"mixed", 7, {}, nullptr, nullptr, {slot("copy")}},
  };
  spec.unanchored_family = "rest";
  spec.mixed_family = "mixed";
  spec.backend = std::move(backend);
  return spec;
}

// ---- Graphs, arrays and packs

// y = identity(x): the copy family's graph.
op::Graph copy_graph(DType dtype = DType::f32, const std::string& name = "copy", int64_t n = kN) {
  op::Graph g(name);
  const op::Tensor x = g.tensor({"x", {n}, dtype});
  g.pointwise("identity", x).set_output(true).set_name("y");
  return g;
}

// A graph of the given pointwise unary ops chained on one input (the last one is the output).
op::Graph chain(const std::vector<std::string>& ops) {
  op::Graph g("chain");
  op::Tensor t = g.tensor({"x", {8}, DType::f32});
  for (const std::string& o : ops) t = g.pointwise(o, t);
  t.set_output(true);
  return g;
}

op::Tensor named(const op::Graph& g, const std::string& name) {
  for (const op::Tensor& t : g.tensors())
    if (t.name() == name) return t;
  throw std::logic_error("test: no tensor named " + name);
}

DeviceProperties cpu_props() {
  return DeviceProperties::query(Device::cpu());
}
DeviceProperties cuda_props(int sm) {
  return stand_in_gpu(sm);
}

Array input(int64_t n = kN, DType dtype = DType::f32) {
  return random_array({n}, dtype, Device::cpu(), 0.5, 2.0);  // never zero
}
Array poisoned(int64_t n = kN, DType dtype = DType::f32) {
  return test::poisoned({n}, dtype);
}
bool same_bytes(const Array& a, const Array& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}
bool all_nan(const Array& a) {
  for (double v : a.to_vector<double>())
    if (!std::isnan(v)) return false;
  return true;
}

VariantPack pack_for(const ExecutionPlans& plans, const Array& x, const Array& y) {
  VariantPack pack(plans.layout());
  pack.set(named(plans.graph(), "x"), x).set(named(plans.graph(), "y"), y);
  return pack;
}

std::vector<int64_t> ids_of(const ExecutionPlans& plans) {
  std::vector<int64_t> out;
  for (int i = 0; i < plans.count(); ++i) out.push_back(plans.at(i).engine_id);
  return out;
}

bool contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

// Every fixture starts from clean records, no opt-in variable and the unranked hook body.
class StandIns : public ::testing::Test {
 protected:
  void SetUp() override {
    rec().reset();
    g_seen = Seen{};
    g_rank = nullptr;
  }
  void TearDown() override { g_rank = nullptr; }

  // Plans a copy graph whose hook returns `list`.
  ExecutionPlans plan_list(const Manifest& m, std::vector<PlanConfig> list,
                           std::vector<HeurMode> modes = {HeurMode::A}) {
    g_rank = [list](const RankInput&) { return list; };
    return ExecutionPlans::create(copy_graph(), m, cpu_props(), modes);
  }

  EnvGuard env_{kOptInVar};
};

class DispatchManifest : public StandIns {};
class DispatchEngineIds : public StandIns {};
class DispatchOptIn : public StandIns {};
class DispatchFacts : public StandIns {};
class DispatchHeuristics : public StandIns {};
class DispatchBuild : public StandIns {};
class DispatchPlanning : public StandIns {};
class DispatchCreateFor : public StandIns {};
class DispatchVariantPack : public StandIns {};
class DispatchPerCall : public StandIns {};
class DispatchConcurrency : public StandIns {};
class DispatchAutotune : public StandIns {};

// ---- Classification

TEST_F(DispatchManifest, FamilyForIsAPureFunctionOfTheNodeOps) {
  const Manifest m(test_spec());
  auto family = [&](const op::Graph& g) {
    const EngineFamily* f = m.family_for(g);
    return f ? f->name : std::string("(none)");
  };
  EXPECT_EQ(family(chain({"identity"})), "copy");
  EXPECT_EQ(family(chain({"neg"})), "other");
  // Ops that anchor nothing are ignored: they neither name a family nor make it mixed.
  EXPECT_EQ(family(chain({"exp", "identity", "relu"})), "copy");
  EXPECT_EQ(family(chain({"identity", "identity"})), "copy");
  EXPECT_EQ(family(chain({"exp"})), "rest");
  EXPECT_EQ(family(chain({"exp", "relu"})), "rest");
  EXPECT_EQ(family(chain({"identity", "neg"})), "mixed");
  EXPECT_EQ(family(chain({"neg", "exp", "identity"})), "mixed");

  // Not the machine, not the environment, not freezing or cloning: only the ops.
  op::Graph g = chain({"exp", "identity"});
  EnvGuard env(kOptInVar);
  env.set("1");
  EXPECT_EQ(family(g), "copy");
  env.unset();
  EXPECT_EQ(family(g), "copy");
  EXPECT_EQ(family(g.clone()), "copy");
  g.freeze();
  EXPECT_EQ(family(g), "copy");
  EXPECT_EQ(m.family_for(g), m.family_for(g.clone()));
  EXPECT_EQ(m.family_for(g), &m.family("copy"));
}

TEST_F(DispatchManifest, WithoutUnanchoredOrMixedFamilyAGraphHasNone) {
  ManifestSpec spec = test_spec();
  spec.unanchored_family = "";
  spec.mixed_family = "";
  const Manifest m(spec);
  EXPECT_EQ(m.family_for(chain({"exp"})), nullptr);
  EXPECT_EQ(m.family_for(chain({"identity", "neg"})), nullptr);
  EXPECT_EQ(m.family_for(chain({"identity"})), &m.family("copy"));

  // A graph of no family plans with no engine on offer: only the (absent) backend would serve.
  const ExecutionPlans plans = ExecutionPlans::create(chain({"identity", "neg"}), m, cpu_props());
  EXPECT_EQ(plans.family(), "");
  EXPECT_EQ(plans.count(), 0);
  EXPECT_EQ(g_seen.calls, 0);  // no family, so not the copy family's hook
}

TEST_F(DispatchManifest, MalformedTablesAreRefused) {
  {
    ManifestSpec s = test_spec();
    s.families.push_back({"copy", 9, {}, nullptr, nullptr, {}});
    expect_throw_with<InvalidArgument>([&] { Manifest m(s); }, {"'copy'", "twice"});
  }
  {
    ManifestSpec s = test_spec();
    s.families.push_back({"again", 3, {}, nullptr, nullptr, {}});
    expect_throw_with<InvalidArgument>([&] { Manifest m(s); }, {"'again'", "block 3", "taken"});
  }
  {
    ManifestSpec s = test_spec();
    s.families.push_back({"negative", -1, {}, nullptr, nullptr, {}});
    expect_throw_with<InvalidArgument>([&] { Manifest m(s); }, {"'negative'", "negative"});
  }
  {
    ManifestSpec s = test_spec();
    s.families.push_back({"thief", 9, {"exp", "identity"}, nullptr, nullptr, {}});
    expect_throw_with<InvalidArgument>([&] { Manifest m(s); }, {"anchor 'identity'", "two"});
  }
  {
    ManifestSpec s = test_spec();
    s.unanchored_family = "nowhere";
    expect_throw_with<InvalidArgument>([&] { Manifest m(s); }, {"'nowhere'", "not in the table"});
  }
  {
    ManifestSpec s = test_spec();
    s.mixed_family = "elsewhere";
    expect_throw_with<InvalidArgument>([&] { Manifest m(s); }, {"'elsewhere'", "not in the table"});
  }
  {
    ManifestSpec s = test_spec();
    std::vector<EngineSlot> many(static_cast<std::size_t>(plan::kFamilyBlock) + 1, slot("copy"));
    s.families.push_back({"crowded", 9, {}, nullptr, nullptr, many});
    expect_throw_with<InvalidArgument>([&] { Manifest m(s); }, {"'crowded'", "slots"});
  }
  const Manifest m(test_spec());
  expect_throw_with<InvalidArgument>([&] { m.family("nowhere"); }, {"no family 'nowhere'"});
}

// ---- Engine ids

TEST_F(DispatchEngineIds, TheManifestHandsOutIdsAndDecodesThemBack) {
  const Manifest m(test_spec());
  for (const EngineFamily& f : m.families()) {
    for (int s = 0; s < static_cast<int>(f.slots.size()); ++s) {
      SCOPED_TRACE(f.name + " slot " + std::to_string(s));
      const int64_t id = m.engine_id(f.name, s);
      EXPECT_EQ(id, 20000 + f.block * 100 + s);
      ASSERT_NE(m.engine(id), nullptr);
      EXPECT_EQ(m.engine(id)->id(), id);
      EXPECT_EQ(m.engine(id)->name(), f.slots[s].name);
      const Manifest::Decoded d = m.decode(id);
      EXPECT_FALSE(d.backend);
      EXPECT_EQ(d.family, &f);
      EXPECT_EQ(d.slot, s);
    }
  }
  EXPECT_EQ(m.engine_id("copy", kSilent), id_of(kSilent));
  expect_throw_with<InvalidArgument>([&] { m.engine_id("copy", 9); }, {"'copy'", "no slot 9"});
  expect_throw_with<InvalidArgument>([&] { m.engine_id("copy", -1); }, {"no slot -1"});
  expect_throw_with<InvalidArgument>([&] { m.engine_id("nowhere", 0); }, {"'nowhere'"});
}

TEST_F(DispatchEngineIds, BackendIdsReservedIdsAndUnknownIds) {
  const Manifest m(test_spec());
  for (int64_t id : {int64_t{0}, int64_t{1}, int64_t{5000}, plan::kBackendHeuristicEngineId}) {
    SCOPED_TRACE(id);
    const Manifest::Decoded d = m.decode(id);
    EXPECT_TRUE(d.backend);
    EXPECT_EQ(d.family, nullptr);
    EXPECT_EQ(d.slot, -1);
    EXPECT_EQ(m.engine(id), nullptr);
  }
  const std::vector<int64_t> nobody = {
      -1,
      10000,
      15000,
      19999,                // negative and the reserved range
      20000 + 3 * 100 + 9,  // past the copy family's last slot
      20000 + 1 * 100,      // a block no family holds
      20000 + 99 * 100 + 5,
      1000000,  // far away
  };
  for (int64_t id : nobody) {
    SCOPED_TRACE(id);
    expect_throw_with<InvalidArgument>([&] { m.decode(id); },
                                       {"engine id " + std::to_string(id), "no family"});
    expect_throw_with<InvalidArgument>([&] { m.engine(id); }, {std::to_string(id)});
  }
}

TEST_F(DispatchEngineIds, AFactoryMustUseTheIdItIsHanded) {
  {
    ManifestSpec s = test_spec();
    s.families[1].slots[kTiled].make = &make_with_other_id;
    expect_throw_with<InvalidArgument>([&] { Manifest m(s); },
                                       {"'tiled'", "'copy'", "id it was handed"});
  }
  {
    ManifestSpec s = test_spec();
    s.families[2].slots[0].make = &make_nothing;
    expect_throw_with<InvalidArgument>([&] { Manifest m(s); }, {"'other'", "id it was handed"});
  }
}

// ---- The opt-in gate

TEST_F(DispatchOptIn, AnOptInSlotIsOfferedOnlyWithTheVariable) {
  const Manifest m(test_spec());
  const EngineFamily& f = m.family("copy");
  auto offered_ids = [&] {
    std::vector<int64_t> ids;
    for (const plan::Engine* e : m.offered(f)) ids.push_back(e->id());
    return ids;
  };
  auto offers_opt_in = [&] {
    for (int64_t id : offered_ids())
      if (id == id_of(kOptIn)) return true;
    return false;
  };
  EnvGuard env(kOptInVar);
  EXPECT_FALSE(m.opt_in_enabled());
  EXPECT_FALSE(offers_opt_in());
  EXPECT_EQ(offered_ids().size(), f.slots.size() - 1);
  for (const char* off : {"0", "", "true", "yes", "11"}) {
    env.set(off);
    EXPECT_FALSE(m.opt_in_enabled()) << off;
    EXPECT_FALSE(offers_opt_in()) << off;
  }
  env.set("1");
  EXPECT_TRUE(m.opt_in_enabled());
  const std::vector<int64_t> all = offered_ids();
  ASSERT_EQ(all.size(), f.slots.size());
  for (std::size_t s = 0; s < all.size(); ++s) EXPECT_EQ(all[s], id_of(static_cast<int>(s)));

  // The gate reaches the plan list: the unranked hook ranks the opt-in engine only when on.
  auto ranks_opt_in = [&] {
    const ExecutionPlans p = ExecutionPlans::create(copy_graph(), m, cpu_props());
    for (int64_t id : ids_of(p))
      if (id == id_of(kOptIn)) return true;
    return false;
  };
  EXPECT_TRUE(ranks_opt_in());
  env.unset();
  EXPECT_FALSE(ranks_opt_in());
  // Its id stays its own either way: ids do not depend on what is offered.
  EXPECT_EQ(m.decode(id_of(kOptIn)).slot, kOptIn);
  EXPECT_EQ(m.engine(id_of(kOptIn))->name(), "optin");
}

// ---- Facts

TEST_F(DispatchFacts, TheAnalyzerRunsOncePerGraphEvenAcrossEngines) {
  const Manifest m(test_spec());
  ExecutionPlans plans =
      plan_list(m, {{id_of(kDeclinesCheck), {}, HeurMode::A, ""},
                    {id_of(kDeclinesBuild), {}, HeurMode::A, ""},
                    {id_of(kTiled), {{"tile", 64}, {"stages", 2}}, HeurMode::A, ""},
                    {id_of(kCopy), {}, HeurMode::A, ""}});
  EXPECT_EQ(rec().analyzer_calls, 1);
  EXPECT_EQ(plans.build_plans(), 2);
  plans.build_plan_at_index(3);
  EXPECT_EQ(rec().checks["declines_check"], 1);
  EXPECT_EQ(rec().checks["declines_build"], 1);
  EXPECT_EQ(rec().checks["tiled"], 1);
  EXPECT_EQ(rec().checks["copy"], 1);
  EXPECT_EQ(rec().analyzer_calls, 1);  // four engines, one analysis
  EXPECT_EQ(rec().facts_not_shared, 0);

  // The record planning attached is the one facts_for hands anyone else, and the hook's.
  const auto shared = plan::facts_for(plans.graph(), &standin_analyzer);
  EXPECT_EQ(shared.get(), &plans.facts());
  EXPECT_EQ(g_seen.facts, &plans.facts());
  EXPECT_EQ(rec().analyzer_calls, 1);
  const auto* facts = dynamic_cast<const StandInFacts*>(&plans.facts());
  ASSERT_NE(facts, nullptr);
  EXPECT_EQ(facts->elements, kN);
  EXPECT_EQ(facts->ops, std::vector<std::string>{"identity"});
  EXPECT_EQ(facts->io_dtype, DType::f32);
  EXPECT_TRUE(contains(plans.describe(), "1000 elements")) << plans.describe();

  // Another graph is another analysis.
  const ExecutionPlans other = ExecutionPlans::create(copy_graph(), m, cpu_props());
  EXPECT_EQ(rec().analyzer_calls, 2);
  EXPECT_NE(&other.facts(), &plans.facts());

  // A family without an analyzer gets the shared fields only.
  const ExecutionPlans rest = ExecutionPlans::create(chain({"exp"}), m, cpu_props());
  EXPECT_EQ(rest.family(), "rest");
  EXPECT_EQ(dynamic_cast<const StandInFacts*>(&rest.facts()), nullptr);
  EXPECT_EQ(rest.facts().ops, std::vector<std::string>{"exp"});
  EXPECT_EQ(rec().analyzer_calls, 2);
}

TEST_F(DispatchFacts, FactsAreAttachedOnlyAfterTheFreeze) {
  const Manifest m(test_spec());
  op::Graph g = copy_graph();
  // Facts of a graph that can still change would go stale: asking for them is refused.
  expect_throw_with<InvalidArgument>([&] { plan::facts_for(g, &standin_analyzer); },
                                     {"not frozen"});
  EXPECT_EQ(rec().analyzer_calls, 0);
  const ExecutionPlans plans = ExecutionPlans::create(g, m, cpu_props());
  EXPECT_EQ(rec().analyzer_calls, 1);
  EXPECT_EQ(rec().analyzer_saw_unfrozen, 0);
  EXPECT_TRUE(g.frozen());
}

TEST_F(DispatchFacts, FactsDescribeCapabilitiesJudge) {
  const Manifest m(test_spec());
  // An f16 graph: the facts record the dtype and reject nothing; the capability rows decide
  // which engines the unranked hook ranks.
  const ExecutionPlans f16 = ExecutionPlans::create(copy_graph(DType::f16), m, cpu_props());
  EXPECT_EQ(f16.facts().io_dtype, DType::f16);
  EXPECT_EQ(ids_of(f16), std::vector<int64_t>{id_of(kF16Only)});

  const ExecutionPlans f32 = ExecutionPlans::create(copy_graph(), m, cpu_props());
  EXPECT_EQ(ids_of(f32),
            (std::vector<int64_t>{id_of(kCopy), id_of(kTiled), id_of(kDeclinesCheck),
                                  id_of(kDeclinesBuild), id_of(kBuggy), id_of(kSilent)}));

  // Device kind and sm range: the CUDA engine serves sm 80..89 inclusive, nothing on the CPU.
  auto ranked_on = [&](int sm) {
    return ids_of(ExecutionPlans::create(copy_graph(), m, cuda_props(sm)));
  };
  for (int sm : {80, 86, 89}) EXPECT_EQ(ranked_on(sm), std::vector<int64_t>{id_of(kCudaOnly)});
  for (int sm : {75, 90, 100}) EXPECT_TRUE(ranked_on(sm).empty()) << sm;

  const Capabilities& cuda = behavior("cuda_only").caps;
  Facts facts;
  EXPECT_EQ(cuda.mismatch(facts, cuda_props(86)), "");
  EXPECT_TRUE(contains(cuda.mismatch(facts, cpu_props()), "runs on CUDA devices, not on cpu"));
  EXPECT_TRUE(contains(cuda.mismatch(facts, cuda_props(90)), "serves sm 80 to 89, not sm 90"));
  EXPECT_TRUE(contains(behavior("copy").caps.mismatch(facts, cuda_props(86)),
                       "runs on the CPU, not on cuda:0"));
  facts.io_dtype = DType::bf16;
  EXPECT_TRUE(contains(cuda.mismatch(facts, cuda_props(86)), "does not serve io dtype bf16"));
}

TEST_F(DispatchFacts, AMismatchTheHookRanksAnywayIsDeclinedAtBuild) {
  const Manifest m(test_spec());
  ExecutionPlans plans = plan_list(m, {{id_of(kF16Only), {}, HeurMode::A, ""},
                                       {id_of(kCudaOnly), {}, HeurMode::A, ""},
                                       {id_of(kCopy), {}, HeurMode::A, ""}});
  EXPECT_EQ(plans.build_plans(), 2);
  const auto declines = plans.declines();
  ASSERT_EQ(declines.size(), 2u);
  EXPECT_EQ(declines[0].first, 0);
  EXPECT_TRUE(contains(declines[0].second, "f16_only")) << declines[0].second;
  EXPECT_TRUE(contains(declines[0].second, "does not serve io dtype f32")) << declines[0].second;
  EXPECT_EQ(declines[1].first, 1);
  EXPECT_TRUE(contains(declines[1].second, "runs on CUDA devices")) << declines[1].second;
  // The capability row judged before the engine was asked or built.
  EXPECT_EQ(rec().checks.count("f16_only"), 0u);
  EXPECT_EQ(rec().checks.count("cuda_only"), 0u);
  ASSERT_EQ(rec().builds.size(), 1u);
  EXPECT_EQ(rec().builds[0].engine_id, id_of(kCopy));
}

// ---- The heuristics hook and the one plan list

TEST_F(DispatchHeuristics, TheHookIsHandedModesFactsOfferedEnginesAndTaggedBackendEntries) {
  auto backend = std::make_shared<StandInBackend>();
  const Manifest m(test_spec(&recording_hook, backend));
  const std::vector<HeurMode> modes = {HeurMode::A, HeurMode::FALLBACK, HeurMode::OPENSOURCE};
  const ExecutionPlans plans = ExecutionPlans::create(copy_graph(), m, cpu_props(), modes);
  ASSERT_EQ(g_seen.calls, 1);
  EXPECT_EQ(g_seen.modes, modes);
  EXPECT_EQ(g_seen.facts, &plans.facts());
  ASSERT_NE(g_seen.device, nullptr);
  EXPECT_EQ(*g_seen.device, cpu_props());
  // The family's offered engines in slot order (the opt-in slot is off).
  std::vector<int64_t> offered;
  for (int s = 0; s < static_cast<int>(copy_slots().size()); ++s)
    if (s != kOptIn) offered.push_back(id_of(s));
  EXPECT_EQ(g_seen.offered, offered);
  // One backend query per mode that asks the backend; OPENSOURCE asks none.
  EXPECT_EQ(backend->asked, (std::vector<HeurMode>{HeurMode::A, HeurMode::FALLBACK}));
  // Entries tagged with the mode that produced them; the delegating entry untagged and last.
  ASSERT_EQ(g_seen.backend.size(), 4u);
  const std::vector<std::pair<int64_t, std::optional<HeurMode>>> want = {
      {101, HeurMode::A},
      {102, HeurMode::A},
      {201, HeurMode::FALLBACK},
      {plan::kBackendHeuristicEngineId, std::nullopt}};
  for (std::size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(g_seen.backend[i].engine_id, want[i].first);
    EXPECT_EQ(g_seen.backend[i].mode, want[i].second);
    EXPECT_TRUE(g_seen.backend[i].knobs.empty());
  }
}

TEST_F(DispatchHeuristics, OpensourceAsksNoBackend) {
  auto backend = std::make_shared<StandInBackend>();
  const Manifest m(test_spec(&recording_hook, backend));
  const ExecutionPlans plans =
      ExecutionPlans::create(copy_graph(), m, cpu_props(), {HeurMode::OPENSOURCE});
  EXPECT_TRUE(backend->asked.empty());
  EXPECT_TRUE(g_seen.backend.empty());
  EXPECT_EQ(g_seen.modes, std::vector<HeurMode>{HeurMode::OPENSOURCE});
  for (int i = 0; i < plans.count(); ++i) EXPECT_GE(plans.at(i).engine_id, plan::kOwnIdBegin);
  // Unranked tags ours with the first mode.
  ASSERT_GT(plans.count(), 0);
  EXPECT_EQ(plans.at(0).mode, HeurMode::OPENSOURCE);
}

TEST_F(DispatchHeuristics, AModeTheBackendDeclinesContributesNothing) {
  auto backend = std::make_shared<StandInBackend>();
  backend->declined_modes = {HeurMode::FALLBACK};
  const Manifest m(test_spec(&recording_hook, backend));
  const ExecutionPlans plans =
      ExecutionPlans::create(copy_graph(), m, cpu_props(), {HeurMode::FALLBACK, HeurMode::A});
  EXPECT_EQ(backend->asked, (std::vector<HeurMode>{HeurMode::FALLBACK, HeurMode::A}));
  ASSERT_EQ(g_seen.backend.size(), 3u);
  EXPECT_EQ(g_seen.backend[0].engine_id, 101);
  EXPECT_EQ(g_seen.backend[1].engine_id, 102);
  EXPECT_EQ(g_seen.backend[2].engine_id, plan::kBackendHeuristicEngineId);
  for (const PlanConfig& p : g_seen.backend) EXPECT_NE(p.mode, HeurMode::FALLBACK);

  // Without the delegating entry nothing untagged arrives.
  backend->delegating = false;
  ExecutionPlans::create(copy_graph(), m, cpu_props(), {HeurMode::A});
  ASSERT_EQ(g_seen.backend.size(), 2u);
  EXPECT_EQ(g_seen.backend[1].engine_id, 102);
}

TEST_F(DispatchHeuristics, WhatTheHookReturnsIsThePlanListPositionForPosition) {
  auto backend = std::make_shared<StandInBackend>();
  const Manifest m(test_spec(&recording_hook, backend));
  const std::vector<PlanConfig> list = {
      {201, {}, HeurMode::FALLBACK, ""},
      {id_of(kTiled), {{"tile", 128}, {"stages", 3}}, HeurMode::A, ""},
      {plan::kBackendHeuristicEngineId, {}, std::nullopt, ""},
      {id_of(kCopy), {}, HeurMode::OPENSOURCE, ""},
      {id_of(kTiled), {{"tile", 64}, {"stages", 2}}, HeurMode::A, ""},
      {101, {}, HeurMode::A, ""},
  };
  const ExecutionPlans plans =
      plan_list(m, list, {HeurMode::A, HeurMode::FALLBACK, HeurMode::OPENSOURCE});
  ASSERT_EQ(plans.count(), static_cast<int>(list.size()));
  const std::vector<std::string> names = {
      "vendor:201", "tiled[stages=3,tile=128]", "vendor:heuristic",
      "copy",       "tiled[stages=2,tile=64]",  "vendor:101"};
  for (int i = 0; i < plans.count(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_TRUE(plans.at(i).same_config(list[i]));
    EXPECT_EQ(plans.at(i).mode, list[i].mode);
    EXPECT_EQ(plans.name_at(i), names[i]);
  }
  const std::string d = plans.describe();
  EXPECT_TRUE(contains(d, "family copy")) << d;
  EXPECT_TRUE(contains(d, "0 vendor:201 id 201 mode FALLBACK")) << d;
  EXPECT_TRUE(contains(d, "2 vendor:heuristic id 9999 mode -")) << d;
  EXPECT_TRUE(contains(d, "3 copy id " + std::to_string(id_of(kCopy)) + " mode OPENSOURCE")) << d;

  // An empty list is a list: nothing to build.
  ExecutionPlans none = plan_list(m, {});
  EXPECT_EQ(none.count(), 0);
  expect_throw_with<NotSupported>([&] { none.build_plans(); }, {"no plan", "0 plans"});
}

TEST_F(DispatchHeuristics, AHookNamingWhatItWasNotGivenIsABug) {
  auto backend = std::make_shared<StandInBackend>();
  const Manifest m(test_spec(&recording_hook, backend));
  const Manifest no_backend(test_spec());
  const PlanConfig copy{id_of(kCopy), {}, HeurMode::A, ""};
  auto expect_bug = [&](const Manifest& man, std::vector<PlanConfig> list,
                        std::initializer_list<std::string> needles) {
    g_rank = [list](const RankInput&) { return list; };
    expect_throw_with<std::logic_error>(
        [&] { ExecutionPlans::create(copy_graph(), man, cpu_props()); }, needles);
  };
  expect_bug(m, {copy, {id_of(kTiled), {{"tile", 64}, {"stages", 2}}, HeurMode::A, ""}, copy},
             {"heuristics of family 'copy'", "copy", "twice"});
  // One config under two modes is still one config.
  expect_bug(m, {{101, {}, HeurMode::A, ""}, {101, {}, HeurMode::FALLBACK, ""}},
             {"vendor:101", "twice"});
  expect_bug(m, {copy, {555, {}, HeurMode::A, ""}}, {"backend entry 555", "did not offer"});
  expect_bug(m, {{202, {}, HeurMode::FALLBACK, ""}}, {"backend entry 202"});
  expect_bug(no_backend, {{101, {}, HeurMode::A, ""}}, {"backend entry 101"});
  // The delegating entry exists only when the backend offered it.
  backend->delegating = false;
  expect_bug(m, {{plan::kBackendHeuristicEngineId, {}, std::nullopt, ""}}, {"backend entry 9999"});
  backend->delegating = true;
  // The opt-in slot (off), and an engine of another family.
  expect_bug(m, {{id_of(kOptIn), {}, HeurMode::A, ""}}, {"optin", "not on offer"});
  expect_bug(m, {{m.engine_id("other", 0), {}, HeurMode::A, ""}}, {"not on offer"});
  // Knobs: outside the domain, a missing axis, an undeclared knob, knobs on a knob-less engine.
  expect_bug(m, {{id_of(kTiled), {{"tile", 96}, {"stages", 2}}, HeurMode::A, ""}},
             {"tiled", "'tile' = 96", "outside its domain"});
  expect_bug(m, {{id_of(kTiled), {{"tile", 64}}, HeurMode::A, ""}},
             {"tiled", "'stages'", "not named"});
  expect_bug(m, {{id_of(kTiled), {{"tile", 64}, {"stages", 2}, {"warps", 4}}, HeurMode::A, ""}},
             {"'warps'", "not declared"});
  expect_bug(m, {{id_of(kCopy), {{"tile", 64}}, HeurMode::A, ""}}, {"copy", "'tile'"});
  // An id nobody holds is the hook's bug too, not the caller's bad input.
  expect_bug(m, {{id_of(kSilent) + 1, {}, HeurMode::A, ""}},
             {"heuristics of family 'copy'", std::to_string(id_of(kSilent) + 1), "no family"});
  expect_bug(m, {copy, {15000, {}, HeurMode::A, ""}}, {"15000", "no family"});

  // With the opt-in variable set the same opt-in entry is fine.
  EnvGuard env(kOptInVar);
  env.set("1");
  g_rank = [](const RankInput&) {
    return std::vector<PlanConfig>{{id_of(kOptIn), {}, HeurMode::A, ""}};
  };
  EXPECT_EQ(ids_of(ExecutionPlans::create(copy_graph(), m, cpu_props())),
            std::vector<int64_t>{id_of(kOptIn)});
}

TEST_F(DispatchHeuristics, DedupeKeepsTheFirstOfEveryConfig) {
  std::vector<PlanConfig> list = {
      {7, {}, HeurMode::A, "a"},
      {id_of(kTiled), {{"tile", 64}, {"stages", 2}}, HeurMode::A, "t64"},
      {7, {}, HeurMode::FALLBACK, "a again"},
      {id_of(kTiled), {{"tile", 128}, {"stages", 2}}, HeurMode::A, "t128"},
      {id_of(kTiled), {{"tile", 64}, {"stages", 2}}, std::nullopt, "t64 again"},
      {plan::kBackendHeuristicEngineId, {}, std::nullopt, "delegate"},
      {7, {}, std::nullopt, "a third time"},
  };
  plan::dedupe(list);
  std::vector<std::string> names;
  for (const PlanConfig& p : list) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"a", "t64", "t128", "delegate"}));
  EXPECT_EQ(list[0].mode, HeurMode::A);
  EXPECT_EQ(list[1].mode, HeurMode::A);
}

TEST_F(DispatchHeuristics, AFamilyWithoutAHookGetsTheUnrankedList) {
  auto backend = std::make_shared<StandInBackend>();
  const Manifest m(test_spec(nullptr, backend));
  const ExecutionPlans plans =
      ExecutionPlans::create(copy_graph(), m, cpu_props(), {HeurMode::FALLBACK, HeurMode::A});
  EXPECT_EQ(g_seen.calls, 0);
  // Matching engines at their first knob point tagged with the first mode, then the backend's
  // entries as handed over (the delegating entry last).
  const std::vector<int64_t> want = {id_of(kCopy),
                                     id_of(kTiled),
                                     id_of(kDeclinesCheck),
                                     id_of(kDeclinesBuild),
                                     id_of(kBuggy),
                                     id_of(kSilent),
                                     201,
                                     101,
                                     102,
                                     plan::kBackendHeuristicEngineId};
  EXPECT_EQ(ids_of(plans), want);
  EXPECT_EQ(plans.at(1).knobs, (Knobs{{"stages", 2}, {"tile", 64}}));
  EXPECT_EQ(plans.name_at(1), "tiled[stages=2,tile=64]");
  for (int i = 0; i < 6; ++i) EXPECT_EQ(plans.at(i).mode, HeurMode::FALLBACK);
  EXPECT_EQ(plans.at(6).mode, HeurMode::FALLBACK);
  EXPECT_EQ(plans.at(7).mode, HeurMode::A);
  EXPECT_EQ(plans.at(9).mode, std::nullopt);
}

// ---- build_plans, select_plan and the at-index APIs

TEST_F(DispatchBuild, BuildPlansTakesTheFirstEntryThatBuilds) {
  const Manifest m(test_spec());
  ExecutionPlans plans =
      plan_list(m, {{id_of(kDeclinesCheck), {}, HeurMode::A, ""},
                    {id_of(kDeclinesBuild), {}, HeurMode::A, ""},
                    {id_of(kTiled), {{"tile", 256}, {"stages", 3}}, HeurMode::A, ""},
                    {id_of(kCopy), {}, HeurMode::A, ""}});
  EXPECT_EQ(plans.selected(), -1);
  EXPECT_EQ(plans.build_plans(), 2);
  EXPECT_EQ(plans.selected(), 2);
  const auto declines = plans.declines();
  ASSERT_EQ(declines.size(), 2u);
  EXPECT_EQ(declines[0], std::make_pair(0, std::string("declines_check: this graph is not mine")));
  EXPECT_EQ(declines[1],
            std::make_pair(1, std::string("declines_build: no kernel for this shape")));
  EXPECT_FALSE(plans.is_built(0));
  EXPECT_FALSE(plans.is_built(1));
  EXPECT_TRUE(plans.is_built(2));
  EXPECT_FALSE(plans.is_built(3));  // never tried
  EXPECT_EQ(rec().checks.count("copy"), 0u);
  EXPECT_EQ(plans.workspace_size(), 256u * 3u);
  ASSERT_FALSE(rec().builds.empty());
  EXPECT_EQ(rec().builds.back().knobs, (Knobs{{"stages", 3}, {"tile", 256}}));

  const std::string d = plans.describe();
  EXPECT_TRUE(contains(d, "  0 declines_check id")) << d;
  EXPECT_TRUE(contains(d, "declined: declines_check: this graph is not mine")) << d;
  EXPECT_TRUE(contains(d, "declined: declines_build: no kernel for this shape")) << d;
  EXPECT_TRUE(contains(d, "* 2 tiled[stages=3,tile=256]")) << d;
  EXPECT_TRUE(contains(d, "built")) << d;

  const Array x = input(), y = poisoned();
  plans.execute(pack_for(plans, x, y), {});
  EXPECT_EQ(rec().last_ran.load(), id_of(kTiled));
  EXPECT_TRUE(same_bytes(x, y));
  EXPECT_EQ(plans.compiled().get(), plans.compiled().get());

  // build_plans again keeps what it has.
  EXPECT_EQ(plans.build_plans(), 2);
}

TEST_F(DispatchBuild, WhenEveryEntryDeclinesNotSupportedListsThemAll) {
  const Manifest m(test_spec());
  ExecutionPlans plans = plan_list(m, {{id_of(kDeclinesCheck), {}, HeurMode::A, ""},
                                       {id_of(kDeclinesBuild), {}, HeurMode::A, ""},
                                       {id_of(kF16Only), {}, HeurMode::A, ""}});
  expect_throw_with<NotSupported>(
      [&] { plans.build_plans(); },
      {"graph 'copy'", "family 'copy'", "3 plans",
       "0 declines_check: declines_check: this graph is not mine",
       "1 declines_build: declines_build: no kernel for this shape", "2 f16_only", "io dtype f32",
       // An engine of the family the list leaves out for its capabilities is named, with why.
       "not listed: cuda_only (runs on CUDA devices, not on cpu)"});
  EXPECT_EQ(plans.selected(), -1);
  EXPECT_EQ(plans.declines().size(), 3u);
  const Array x = input(), y = poisoned();
  expect_throw_with<InvalidArgument>([&] { plans.execute(pack_for(plans, x, y), {}); },
                                     {"no plan is built"});
  expect_throw_with<InvalidArgument>([&] { plans.workspace_size(); }, {"no plan is built"});
  expect_throw_with<InvalidArgument>([&] { plans.compiled(); }, {"no plan is built"});
  EXPECT_TRUE(all_nan(y));
}

TEST_F(DispatchBuild, AnEngineBugIsNotADecline) {
  const Manifest m(test_spec());
  ExecutionPlans plans =
      plan_list(m, {{id_of(kBuggy), {}, HeurMode::A, ""}, {id_of(kCopy), {}, HeurMode::A, ""}});
  try {
    plans.build_plans();
    ADD_FAILURE() << "expected the engine's bug to propagate";
  } catch (const NotSupported& e) {
    ADD_FAILURE() << "a bug was treated as a decline: " << e.what();
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(contains(e.what(), "buggy: a bug, not a decline")) << e.what();
  }
  EXPECT_EQ(plans.selected(), -1);
  EXPECT_FALSE(plans.is_built(1));
  EXPECT_TRUE(plans.declines().empty());
}

TEST_F(DispatchBuild, SelectPlanPinsAndAPinnedDeclineRaises) {
  const Manifest m(test_spec());
  ExecutionPlans plans =
      plan_list(m, {{id_of(kCopy), {}, HeurMode::A, ""},
                    {id_of(kTiled), {{"tile", 128}, {"stages", 2}}, HeurMode::A, ""},
                    {id_of(kDeclinesBuild), {}, HeurMode::A, ""}});
  plans.select_plan(1);
  EXPECT_EQ(plans.build_plans(), 1);
  EXPECT_FALSE(plans.is_built(0));  // the walk did not start at 0
  const Array x = input(), y = poisoned();
  const VariantPack pack = pack_for(plans, x, y);
  plans.execute(pack, {});
  EXPECT_EQ(rec().last_ran.load(), id_of(kTiled));
  EXPECT_TRUE(same_bytes(x, y));

  // Pinning an entry that declines raises its decline rather than running another.
  plans.select_plan(2);
  expect_throw_with<NotSupported>([&] { plans.build_plans(); },
                                  {"pinned plan 2", "declines_build", "no kernel for this shape"});
  EXPECT_EQ(plans.selected(), -1);
  EXPECT_FALSE(plans.is_built(0));
  const Array y2 = poisoned();
  expect_throw_with<InvalidArgument>([&] { plans.execute(pack_for(plans, x, y2), {}); },
                                     {"no plan is built"});
  EXPECT_TRUE(all_nan(y2));

  // Pinning a built entry selects it at once.
  plans.select_plan(1);
  EXPECT_EQ(plans.selected(), 1);
  plans.select_plan(0);
  EXPECT_EQ(plans.selected(), -1);
  EXPECT_EQ(plans.build_plans(), 0);
  plans.execute(pack_for(plans, x, y2), {});
  EXPECT_EQ(rec().last_ran.load(), id_of(kCopy));
  EXPECT_TRUE(same_bytes(x, y2));

  for (int bad : {-1, 3})
    expect_throw_with<InvalidArgument>([&] { plans.select_plan(bad); },
                                       {"select_plan", std::to_string(bad), "[0, 3)"});
}

TEST_F(DispatchBuild, TheAtIndexApisAddressTheOneList) {
  auto backend = std::make_shared<StandInBackend>();
  backend->declined_builds = {102};
  const Manifest m(test_spec(&recording_hook, backend));
  ExecutionPlans plans =
      plan_list(m, {{101, {}, HeurMode::A, ""},
                    {id_of(kTiled), {{"tile", 64}, {"stages", 3}}, HeurMode::A, ""},
                    {102, {}, HeurMode::A, ""},
                    {id_of(kCopy), {}, HeurMode::A, ""}});
  ASSERT_EQ(plans.count(), 4);
  EXPECT_EQ(plans.name_at(0), "vendor:101");
  EXPECT_EQ(plans.name_at(1), "tiled[stages=3,tile=64]");
  EXPECT_EQ(plans.name_at(3), "copy");
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(plans.is_built(i));

  plans.build_plan_at_index(1);
  EXPECT_TRUE(plans.is_built(1));
  EXPECT_EQ(plans.workspace_size_at_index(1), 64u * 3u);
  plans.build_plan_at_index(1);  // cached: the engine builds once
  EXPECT_EQ(rec().builds.size(), 1u);
  EXPECT_EQ(plans.selected(), -1);  // building an index selects nothing

  expect_throw_with<NotSupported>([&] { plans.build_plan_at_index(2); }, {"vendor", "102"});
  EXPECT_FALSE(plans.is_built(2));
  ASSERT_EQ(plans.declines().size(), 1u);
  EXPECT_EQ(plans.declines()[0].first, 2);

  plans.build_plan_at_index(0);  // a backend entry, built by the backend
  EXPECT_EQ(plans.workspace_size_at_index(0), 0u);

  // Each index runs its own plan, selected or not.
  const Array x = input();
  for (int i : {1, 0}) {
    const Array y = poisoned();
    plans.execute_plan_at_index(i, pack_for(plans, x, y), {});
    EXPECT_EQ(rec().last_ran.load(), plans.at(i).engine_id);
    EXPECT_TRUE(same_bytes(x, y));
  }
  const Array y = poisoned();
  expect_throw_with<InvalidArgument>(
      [&] { plans.execute_plan_at_index(3, pack_for(plans, x, y), {}); },
      {"execute_plan_at_index", "plan 3", "not built"});
  expect_throw_with<InvalidArgument>([&] { plans.workspace_size_at_index(3); },
                                     {"workspace_size_at_index", "plan 3", "not built"});
  EXPECT_TRUE(all_nan(y));

  const VariantPack pack = pack_for(plans, x, y);
  for (int bad : {-1, 4, 100}) {
    SCOPED_TRACE(bad);
    const std::string idx = "index " + std::to_string(bad);
    expect_throw_with<InvalidArgument>([&] { plans.at(bad); }, {idx, "[0, 4)"});
    expect_throw_with<InvalidArgument>([&] { plans.name_at(bad); }, {idx});
    expect_throw_with<InvalidArgument>([&] { plans.build_plan_at_index(bad); },
                                       {"build_plan_at_index", idx});
    expect_throw_with<InvalidArgument>([&] { plans.is_built(bad); }, {"is_built", idx});
    expect_throw_with<InvalidArgument>([&] { plans.workspace_size_at_index(bad); },
                                       {"workspace_size_at_index", idx});
    expect_throw_with<InvalidArgument>([&] { plans.execute_plan_at_index(bad, pack, {}); },
                                       {"execute_plan_at_index", idx});
  }
  EXPECT_TRUE(all_nan(y));
  // build_plans walks from 0, so the backend's entry 0 (already built) is taken.
  EXPECT_EQ(plans.build_plans(), 0);
}

// ---- One-shot planning

TEST_F(DispatchPlanning, ASecondPlanOfOneGraphIsRefused) {
  const Manifest m(test_spec());
  op::Graph g = copy_graph();
  const ExecutionPlans first = ExecutionPlans::create(g, m, cpu_props());
  expect_throw_with<InvalidArgument>([&] { ExecutionPlans::create(g, m, cpu_props()); },
                                     {"graph 'copy'", "already planned", "one-shot"});
  expect_throw_with<InvalidArgument>(
      [&] { ExecutionPlans::create_for(g, m, cpu_props(), id_of(kCopy), {}); },
      {"already planned"});
  // A handle to the same graph is the same graph.
  const op::Graph same = g;
  expect_throw_with<InvalidArgument>([&] { ExecutionPlans::create(same, m, cpu_props()); },
                                     {"already planned"});
  EXPECT_EQ(g_seen.calls, 1);
  EXPECT_EQ(rec().analyzer_calls, 1);
  // A clone is a new graph: planned once, for another device say.
  const ExecutionPlans second = ExecutionPlans::create(g.clone(), m, cpu_props());
  EXPECT_EQ(second.count(), first.count());
}

TEST_F(DispatchPlanning, PlanningFreezesTheWholeGraph) {
  const Manifest m(test_spec());
  op::Graph g = copy_graph();
  op::Tensor x = named(g, "x");
  op::Tensor y = named(g, "y");
  EXPECT_FALSE(g.frozen());
  const ExecutionPlans plans = ExecutionPlans::create(g, m, cpu_props());
  EXPECT_TRUE(g.frozen());
  EXPECT_TRUE(plans.graph().frozen());
  expect_throw_with<InvalidArgument>([&] { x.set_name("z"); }, {"frozen"});
  expect_throw_with<InvalidArgument>([&] { x.set_dims({4}); }, {"frozen"});
  expect_throw_with<InvalidArgument>([&] { x.set_dtype(DType::f64); }, {"frozen"});
  expect_throw_with<InvalidArgument>([&] { x.set_uid(12345); }, {"frozen"});
  expect_throw_with<InvalidArgument>([&] { y.set_output(false); }, {"frozen"});
  expect_throw_with<InvalidArgument>([&] { g.tensor({"w", {4}, DType::f32}); }, {"frozen"});
  expect_throw_with<InvalidArgument>([&] { g.pointwise("neg", x); }, {"frozen"});
  // Inspection still works, and nothing changed.
  EXPECT_EQ(x.name(), "x");
  EXPECT_EQ(x.dims(), (op::Dims{kN}));
  EXPECT_EQ(g.nodes().size(), 1u);
  EXPECT_EQ(g.tensors().size(), 2u);
  EXPECT_FALSE(y.is_virtual());
  EXPECT_TRUE(contains(g.to_json(), "\"frozen\":true"));
}

TEST_F(DispatchPlanning, AGraphFailingValidationIsLeftUnplannedAndUnfrozen) {
  const Manifest m(test_spec());
  op::Graph g("empty");
  const op::Tensor x = g.tensor({"x", {kN}, DType::f32});
  expect_throw_with<InvalidArgument>([&] { ExecutionPlans::create(g, m, cpu_props()); },
                                     {"no nodes"});
  expect_throw_with<InvalidArgument>(
      [&] { ExecutionPlans::create_for(g, m, cpu_props(), m.engine_id("rest", 0), {}); },
      {"no nodes"});
  EXPECT_FALSE(g.frozen());
  EXPECT_EQ(rec().analyzer_calls, 0);
  EXPECT_EQ(g_seen.calls, 0);
  // Still mutable, and plannable once fixed.
  g.pointwise("identity", x).set_output(true).set_name("y");
  ExecutionPlans plans = ExecutionPlans::create(g, m, cpu_props());
  EXPECT_TRUE(g.frozen());
  EXPECT_EQ(plans.family(), "copy");
  EXPECT_EQ(plans.build_plans(), 0);
}

TEST_F(DispatchPlanning, NoModesIsRefusedBeforeTheGraphIsClaimed) {
  const Manifest m(test_spec());
  op::Graph g = copy_graph();
  expect_throw_with<InvalidArgument>([&] { ExecutionPlans::create(g, m, cpu_props(), {}); },
                                     {"modes"});
  EXPECT_FALSE(g.frozen());
  EXPECT_NO_THROW(ExecutionPlans::create(g, m, cpu_props()));
}

// ---- create_for: replaying a config

TEST_F(DispatchCreateFor, ReplaysOneConfig) {
  const Manifest m(test_spec());
  const Knobs knobs = {{"tile", 256}, {"stages", 3}};
  ExecutionPlans plans =
      ExecutionPlans::create_for(copy_graph(), m, cpu_props(), id_of(kTiled), knobs);
  EXPECT_EQ(g_seen.calls, 0);  // no ranking
  ASSERT_EQ(plans.count(), 1);
  EXPECT_EQ(plans.at(0).engine_id, id_of(kTiled));
  EXPECT_EQ(plans.at(0).knobs, knobs);
  EXPECT_EQ(plans.at(0).mode, std::nullopt);
  EXPECT_EQ(plans.name_at(0), "tiled[stages=3,tile=256]");
  EXPECT_EQ(plans.family(), "copy");
  EXPECT_EQ(rec().analyzer_calls, 1);
  EXPECT_EQ(plans.build_plans(), 0);
  ASSERT_EQ(rec().builds.size(), 1u);
  EXPECT_EQ(rec().builds[0].knobs, knobs);
  EXPECT_EQ(plans.workspace_size(), 768u);
  const Array x = input(), y = poisoned();
  plans.execute(pack_for(plans, x, y), {});
  EXPECT_EQ(rec().last_ran.load(), id_of(kTiled));
  EXPECT_TRUE(same_bytes(x, y));

  // A replayed config that declines has nowhere else to go.
  ExecutionPlans declines =
      ExecutionPlans::create_for(copy_graph(), m, cpu_props(), id_of(kDeclinesBuild), {});
  expect_throw_with<NotSupported>([&] { declines.build_plans(); }, {"no kernel for this shape"});
}

TEST_F(DispatchCreateFor, ReplaysABackendEntry) {
  auto backend = std::make_shared<StandInBackend>();
  const Manifest m(test_spec(&recording_hook, backend));
  ExecutionPlans plans = ExecutionPlans::create_for(copy_graph(), m, cpu_props(), 201, {});
  EXPECT_TRUE(backend->asked.empty());  // replaying asks no heuristics, the backend's neither
  EXPECT_EQ(plans.name_at(0), "vendor:201");
  EXPECT_EQ(plans.build_plans(), 0);
  const Array x = input(), y = poisoned();
  plans.execute(pack_for(plans, x, y), {});
  EXPECT_EQ(rec().last_ran.load(), 201);
  EXPECT_TRUE(same_bytes(x, y));
}

TEST_F(DispatchCreateFor, RefusesIdsAndKnobsThatDoNotFit) {
  const Manifest m(test_spec());
  op::Graph g = copy_graph();
  auto refused = [&](int64_t id, const Knobs& knobs, std::initializer_list<std::string> needles) {
    expect_throw_with<InvalidArgument>(
        [&] { ExecutionPlans::create_for(g, m, cpu_props(), id, knobs); }, needles);
    EXPECT_FALSE(g.frozen());  // refused before the graph was claimed
  };
  refused(m.engine_id("other", 1), {{"tile", 64}, {"stages", 2}},
          {std::to_string(m.engine_id("other", 1)), "family 'other'", "family 'copy'"});
  refused(101, {}, {"101", "backend id", "no backend"});
  {
    // The family is the graph's: an engine of the copy family does not serve a mixed graph.
    op::Graph mixed = chain({"identity", "neg"});
    expect_throw_with<InvalidArgument>(
        [&] { ExecutionPlans::create_for(mixed, m, cpu_props(), id_of(kCopy), {}); },
        {"family 'copy'", "the graph is of family 'mixed'"});
    EXPECT_FALSE(mixed.frozen());
  }
  refused(plan::kBackendHeuristicEngineId, {}, {"no backend"});
  refused(15000, {}, {"15000", "no family"});
  refused(id_of(kSilent) + 1, {}, {std::to_string(id_of(kSilent) + 1)});
  refused(id_of(kTiled), {{"tile", 100}, {"stages", 2}}, {"tiled", "'tile' = 100", "outside"});
  refused(id_of(kTiled), {{"tile", 64}}, {"'stages'", "not named"});
  refused(id_of(kTiled), {}, {"not named"});
  refused(id_of(kCopy), {{"tile", 64}}, {"'tile'", "not declared"});
  // The graph is still plannable.
  EXPECT_EQ(ExecutionPlans::create_for(g, m, cpu_props(), id_of(kCopy), {}).count(), 1);
}

// ---- The variant pack

TEST_F(DispatchVariantPack, PositionsFollowAscendingUids) {
  const Manifest m(test_spec());
  op::Graph g("uids");
  const op::Tensor a = g.tensor({"a", {4}, DType::f32, {}, 30});
  const op::Tensor b = g.tensor({"b", {4}, DType::f32, {}, 10});
  const op::Tensor t = g.pointwise("add", a, b);  // virtual: no position
  op::Tensor y = g.pointwise("identity", t);
  y.set_output(true).set_uid(20).set_name("y");
  const ExecutionPlans plans = ExecutionPlans::create(g, m, cpu_props());
  const plan::OperandLayout& layout = plans.layout();
  ASSERT_EQ(layout.size(), 3);
  EXPECT_EQ(layout.uids(), (std::vector<int64_t>{10, 20, 30}));
  EXPECT_EQ(layout.index_of(10), 0);
  EXPECT_EQ(layout.index_of(20), 1);
  EXPECT_EQ(layout.index_of(30), 2);
  EXPECT_EQ(layout.index_of(b), 0);
  EXPECT_EQ(layout.index_of(y), 1);
  EXPECT_EQ(layout.index_of(a), 2);
  EXPECT_EQ(layout.tensor_at(2).name(), "a");
  EXPECT_EQ(layout.tensor_at(0), b);
  expect_throw_with<InvalidArgument>([&] { layout.index_of(t.uid()); },
                                     {"uid " + std::to_string(t.uid()), "not an operand"});
  expect_throw_with<InvalidArgument>([&] { layout.index_of(int64_t{999}); }, {"uid 999"});
  expect_throw_with<InvalidArgument>([&] { layout.index_of(t); }, {"not an operand"});
  expect_throw_with<InvalidArgument>([&] { layout.index_of(op::Tensor()); }, {"undefined"});
  // A tensor of another graph with a uid of this one is not this graph's operand.
  op::Graph other("other");
  const op::Tensor stranger = other.tensor({"s", {4}, DType::f32, {}, 10});
  expect_throw_with<InvalidArgument>([&] { layout.index_of(stranger); }, {"'s'", "another graph"});

  VariantPack pack(layout);
  EXPECT_EQ(pack.size(), 3);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(pack.data()[i].filled());
  const Array arr = input(4);
  pack.set(int64_t{30}, arr);
  EXPECT_TRUE(pack.data()[2].filled());
  EXPECT_EQ(pack.data()[2].data, arr.data());
  pack.set(b, arr);
  EXPECT_EQ(pack.data()[0].data, arr.data());
  expect_throw_with<InvalidArgument>([&] { pack.set(int64_t{999}, arr); }, {"uid 999"});
  expect_throw_with<InvalidArgument>([&] { pack.set(t, arr); }, {"not an operand"});
  expect_throw_with<InvalidArgument>([&] { pack.set_at(3, arr); }, {"position 3", "[0, 3)"});
  expect_throw_with<InvalidArgument>([&] { pack.set_at(-1, arr); }, {"position -1"});
  EXPECT_FALSE(pack.data()[1].filled());
}

TEST_F(DispatchVariantPack, OperandsFromArraysDlpackAndRawPointers) {
  // From an eagle Array (a strided view included).
  const Array arr = random_array({3, 5}, DType::f64, Device::cpu(), 0.5, 2.0);
  const OperandBuffer ab = Operand(arr).buffer();
  EXPECT_EQ(ab.data, arr.data());
  EXPECT_EQ(ab.dtype, DType::f64);
  EXPECT_EQ(ab.ndim, 2);
  EXPECT_EQ(ab.dims[0], 3);
  EXPECT_EQ(ab.dims[1], 5);
  EXPECT_EQ(ab.strides[0], 5);
  EXPECT_EQ(ab.strides[1], 1);
  EXPECT_EQ(ab.device, Device::cpu());
  EXPECT_TRUE(ab.row_major());
  EXPECT_EQ(ab.numel(), 15);
  const Array cols = arr.slice(1, 1, 3);
  const OperandBuffer cb = Operand(cols).buffer();
  EXPECT_EQ(cb.data, cols.data());
  EXPECT_EQ(cb.dims[1], 2);
  EXPECT_EQ(cb.strides[0], 5);
  EXPECT_FALSE(cb.row_major());
  expect_throw_with<InvalidArgument>([&] { (void)Operand{Array()}; }, {"undefined"});

  // From a DLTensor built by hand over a std::vector.
  std::vector<float> host = {1.5f, 2.5f, 3.5f, 4.5f, 5.5f, 6.5f, 7.5f};
  int64_t shape[2] = {2, 3};
  DLTensor dl{};
  dl.data = host.data();
  dl.device = {kDLCPU, 0};
  dl.ndim = 2;
  dl.dtype = {kDLFloat, 32, 1};
  dl.shape = shape;
  dl.strides = nullptr;  // row-major
  dl.byte_offset = sizeof(float);
  const OperandBuffer db = Operand::dlpack(dl).buffer();
  EXPECT_EQ(db.data, host.data() + 1);
  EXPECT_EQ(db.dtype, DType::f32);
  EXPECT_EQ(db.ndim, 2);
  EXPECT_EQ(db.dims[0], 2);
  EXPECT_EQ(db.dims[1], 3);
  EXPECT_EQ(db.strides[0], 3);
  EXPECT_EQ(db.strides[1], 1);
  EXPECT_TRUE(db.device.is_cpu());
  int64_t col_major[2] = {1, 2};
  dl.strides = col_major;
  dl.byte_offset = 0;
  const OperandBuffer dc = Operand::dlpack(dl).buffer();
  EXPECT_EQ(dc.data, host.data());
  EXPECT_EQ(dc.strides[0], 1);
  EXPECT_EQ(dc.strides[1], 2);
  EXPECT_FALSE(dc.row_major());
  dl.dtype = {kDLFloat, 32, 4};
  expect_throw_with<InvalidArgument>([&] { Operand::dlpack(dl); }, {"lanes"});

  // A raw pointer with a declared shape (and strides).
  const OperandBuffer rb = Operand::raw(host.data(), {7}, DType::f32, Device::cpu()).buffer();
  EXPECT_EQ(rb.data, host.data());
  EXPECT_EQ(rb.ndim, 1);
  EXPECT_EQ(rb.dims[0], 7);
  EXPECT_EQ(rb.strides[0], 1);
  const OperandBuffer rs =
      Operand::raw(host.data(), {3, 2}, DType::f32, Device::cuda(1), {1, 3}).buffer();
  EXPECT_EQ(rs.device, Device::cuda(1));
  EXPECT_EQ(rs.strides[0], 1);
  EXPECT_EQ(rs.strides[1], 3);
  EXPECT_EQ(plan::describe(rs), "f32[3,2] on cuda:1");
  EXPECT_EQ(plan::describe(OperandBuffer{}), "(not filled)");
  EXPECT_NO_THROW(Operand::raw(nullptr, {0, 4}, DType::f32, Device::cpu()));
  expect_throw_with<InvalidArgument>([&] { Operand::raw(nullptr, {4}, DType::f32, Device::cpu()); },
                                     {"null"});
  expect_throw_with<InvalidArgument>(
      [&] {
        Operand::raw(host.data(), {4, 2}, DType::f32, Device::cpu(), {1});
      },
      {"strides"});
  expect_throw_with<InvalidArgument>(
      [&] {
        Operand::raw(host.data(), {1, 1, 1, 1, 1, 1, 1, 1, 1}, DType::f32, Device::cpu());
      },
      {"9 dims", "at most 8"});
  expect_throw_with<InvalidArgument>(
      [&] { Operand::raw(host.data(), {-1}, DType::f32, Device::cpu()); }, {">= 0"});
}

TEST_F(DispatchVariantPack, EveryOperandKindReachesThePlan) {
  const Manifest m(test_spec());
  ExecutionPlans plans = ExecutionPlans::create(copy_graph(), m, cpu_props());
  ASSERT_EQ(plans.build_plans(), 0);
  const int xp = plans.layout().index_of(named(plans.graph(), "x"));
  const int yp = plans.layout().index_of(named(plans.graph(), "y"));

  // Input as a DLTensor over a std::vector, output as a raw pointer with a declared shape.
  const std::vector<double> values = random_values(kN, 0.5, 2.0);
  std::vector<float> in(values.begin(), values.end());
  std::vector<float> out(kN, std::nanf(""));
  int64_t shape[1] = {kN};
  DLTensor dl{};
  dl.data = in.data();
  dl.device = {kDLCPU, 0};
  dl.ndim = 1;
  dl.dtype = {kDLFloat, 32, 1};
  dl.shape = shape;
  VariantPack pack(plans.layout());
  pack.set_at(xp, Operand::dlpack(dl));
  pack.set_at(yp, Operand::raw(out.data(), {kN}, DType::f32, Device::cpu()));
  plans.execute(pack, {});
  EXPECT_EQ(in, out);
}

TEST_F(DispatchVariantPack, SetDataSwapsOnlyThePointer) {
  const Manifest m(test_spec());
  ExecutionPlans plans = ExecutionPlans::create(copy_graph(), m, cpu_props());
  ASSERT_EQ(plans.build_plans(), 0);
  const Array x = input(), y1 = poisoned(), y2 = poisoned();
  VariantPack pack = pack_for(plans, x, y1);
  const int yp = plans.layout().index_of(named(plans.graph(), "y"));
  const OperandBuffer before = pack.data()[yp];
  pack.set_data(yp, y2.data());
  const OperandBuffer& after = pack.data()[yp];
  EXPECT_EQ(after.data, y2.data());
  EXPECT_EQ(after.dtype, before.dtype);
  EXPECT_EQ(after.ndim, before.ndim);
  EXPECT_EQ(std::memcmp(after.dims, before.dims, sizeof(before.dims)), 0);
  EXPECT_EQ(std::memcmp(after.strides, before.strides, sizeof(before.strides)), 0);
  EXPECT_EQ(after.device, before.device);
  plans.execute(pack, {});
  EXPECT_TRUE(same_bytes(x, y2));
  EXPECT_TRUE(all_nan(y1));  // the old pointer is not written
}

TEST_F(DispatchVariantPack, SetDataChecksThePosition) {
  const Manifest m(test_spec());
  ExecutionPlans plans = ExecutionPlans::create(copy_graph(), m, cpu_props());
  ASSERT_EQ(plans.build_plans(), 0);
  const Array x = input(), y = poisoned(), other = poisoned();
  VariantPack pack = pack_for(plans, x, y);
  for (int bad : {1000, 2, -1}) {
    SCOPED_TRACE(bad);
    expect_throw_with<InvalidArgument>(
        [&] { pack.set_data(bad, other.data()); },
        {"VariantPack::set_data", "position " + std::to_string(bad), "outside [0, 2)"});
  }
  expect_throw_with<InvalidArgument>([&] { pack.set_at(2, x); },
                                     {"VariantPack::set_at", "position 2", "outside [0, 2)"});
  // A position not filled yet has no shape to keep: set_data refuses it.
  VariantPack fresh(plans.layout());
  expect_throw_with<InvalidArgument>([&] { fresh.set_data(0, other.data()); },
                                     {"VariantPack::set_data", "position 0", "not filled"});
  EXPECT_FALSE(fresh.data()[0].filled());
  // The refused calls changed nothing: the pack still runs into y.
  plans.execute(pack, {});
  EXPECT_TRUE(same_bytes(x, y));
  EXPECT_TRUE(all_nan(other));
  expect_throw_with<InvalidArgument>([&] { plans.layout().tensor_at(2); },
                                     {"OperandLayout::tensor_at", "position 2", "outside [0, 2)"});
  expect_throw_with<InvalidArgument>([&] { plans.layout().tensor_at(-1); }, {"position -1"});
}

TEST_F(DispatchVariantPack, APackOwnsItsLayout) {
  const Manifest m(test_spec());
  const Array x = input(), y = poisoned();
  std::optional<VariantPack> pack;
  {
    ExecutionPlans plans = ExecutionPlans::create(copy_graph(), m, cpu_props());
    // From a temporary layout: the pack used to keep a pointer to it.
    pack.emplace(plan::OperandLayout(plans.graph()));
    EXPECT_EQ(pack->size(), 2);
    // A copy of the plan's layout is the plan's layout: its packs execute.
    ASSERT_EQ(plans.build_plans(), 0);
    const plan::OperandLayout copy = plans.layout();
    EXPECT_TRUE(copy.same_as(plans.layout()));
    VariantPack of_copy(copy);
    of_copy.set(named(plans.graph(), "x"), x).set(named(plans.graph(), "y"), y);
    plans.execute(of_copy, {});
    EXPECT_TRUE(same_bytes(x, y));
  }
  // The graph and the plans are gone; the pack's layout is still whole.
  EXPECT_EQ(pack->layout().size(), 2);
  EXPECT_EQ(pack->layout().tensor_at(0).name(), "x");
  pack->set(pack->layout().tensor_at(0), x).set_at(1, y);
  EXPECT_TRUE(pack->data()[1].filled());
}

TEST_F(DispatchVariantPack, OperandsRefuseCountsPastInt64AndCarryReadOnly) {
  std::vector<float> host(8);
  expect_throw_with<InvalidArgument>(
      [&] { Operand::raw(host.data(), {int64_t{1} << 62}, DType::f32, Device::cpu()); },
      {"Operand::raw", "[4611686018427387904]", "int64"});
  expect_throw_with<InvalidArgument>(
      [&] {
        Operand::raw(host.data(), {int64_t{1} << 32, int64_t{1} << 32}, DType::u8, Device::cpu());
      },
      {"Operand::raw", "more elements than fit in int64"});
  expect_throw_with<InvalidArgument>(
      [&] { Operand::raw(host.data(), {2}, DType::f32, Device::cpu(), {int64_t{1} << 62}); },
      {"Operand::raw", "do not fit in int64"});
  expect_throw_with<InvalidArgument>(
      [&] { plan::dense_buffer(nullptr, {int64_t{1} << 62}, DType::f64, Device::cpu()); },
      {"dense_buffer", "int64"});
  // Read-only travels from an Array and from a managed DLPack tensor's flag.
  const Array a = Array::from(std::vector<float>{1, 2}, {2}, Device::cpu());
  EXPECT_FALSE(Operand(a).buffer().read_only);
  EXPECT_TRUE(Operand(a.as_read_only()).buffer().read_only);
  DLManagedTensorVersioned* t = to_dlpack(a.as_read_only());
  EXPECT_TRUE(Operand::dlpack(*t).buffer().read_only);
  EXPECT_FALSE(Operand::dlpack(t->dl_tensor).buffer().read_only);  // a bare DLTensor has no flags
  t->flags = 0;
  EXPECT_FALSE(Operand::dlpack(*t).buffer().read_only);
  t->deleter(t);
}

TEST_F(DispatchPlanning, AMovedFromPlanListThrowsInsteadOfCrashing) {
  const Manifest m(test_spec());
  ExecutionPlans plans = ExecutionPlans::create(copy_graph(), m, cpu_props());
  ExecutionPlans kept = std::move(plans);
  const std::string rule = "moved from and holds no plans";
  expect_throw_with<InvalidArgument>([&] { plans.count(); }, {"ExecutionPlans", rule});
  expect_throw_with<InvalidArgument>([&] { plans.layout(); }, {rule});
  expect_throw_with<InvalidArgument>([&] { plans.build_plans(); }, {rule});
  EXPECT_EQ(kept.build_plans(), 0);
  const Array x = input(), y = poisoned();
  expect_throw_with<InvalidArgument>([&] { plans.execute(pack_for(kept, x, y), {}); }, {rule});
  EXPECT_TRUE(all_nan(y));
}

TEST_F(DispatchPlanning, AnInputNoNodeReadsIsRefusedAndTheGraphStaysUnplanned) {
  const Manifest m(test_spec());
  op::Graph g = copy_graph();
  g.tensor({"stray", {4}, DType::f32});
  expect_throw_with<InvalidArgument>([&] { ExecutionPlans::create(g, m, cpu_props()); },
                                     {"Graph::validate", "input 'stray'", "read by no node"});
  EXPECT_FALSE(g.frozen());
  g.pointwise("identity", named(g, "stray"));
  EXPECT_NO_THROW(ExecutionPlans::create(g, m, cpu_props()));
}

TEST_F(DispatchVariantPack, APackOfAnotherPlansLayoutIsRefused) {
  const Manifest m(test_spec());
  ExecutionPlans p1 = ExecutionPlans::create(copy_graph(), m, cpu_props());
  ExecutionPlans p2 = ExecutionPlans::create(copy_graph(), m, cpu_props());
  ASSERT_EQ(p1.build_plans(), 0);
  ASSERT_EQ(p2.build_plans(), 0);
  const Array x = input(), y = poisoned();
  const VariantPack of_p1 = pack_for(p1, x, y);
  expect_throw_with<InvalidArgument>([&] { p2.execute(of_p1, {}); }, {"another plan's layout"});
  expect_throw_with<InvalidArgument>([&] { p2.execute_plan_at_index(0, of_p1, {}); },
                                     {"another plan's layout"});
  // Even a layout built again from the plan's own graph is not the plan's.
  const plan::OperandLayout rebuilt(p1.graph());
  VariantPack of_rebuilt(rebuilt);
  of_rebuilt.set_at(0, x).set_at(1, y);
  expect_throw_with<InvalidArgument>([&] { p1.execute(of_rebuilt, {}); },
                                     {"another plan's layout"});
  EXPECT_TRUE(all_nan(y));
  EXPECT_EQ(rec().runs.load(), 0);
  // A moved ExecutionPlans keeps its layout: packs made before the move still fit.
  ExecutionPlans moved = std::move(p1);
  moved.execute(of_p1, {});
  EXPECT_TRUE(same_bytes(x, y));
}

// ---- The per-call check

TEST_F(DispatchPerCall, AnIllegalCallIsRefusedAndExplainedAndWritesNothing) {
  const Manifest m(test_spec());
  ExecutionPlans plans = ExecutionPlans::create(copy_graph(), m, cpu_props());
  ASSERT_EQ(plans.build_plans(), 0);
  const op::Tensor xt = named(plans.graph(), "x");
  const op::Tensor yt = named(plans.graph(), "y");
  const auto compiled = plans.compiled();
  const Array x = input();
  const std::vector<double> fresh = random_values(kN, 0.5, 2.0);
  std::vector<float> host_x(fresh.begin(), fresh.end());

  struct Case {
    std::string what;
    std::function<void(VariantPack&, const Array& y)> spoil;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      {"wrong dtype",
       [&](VariantPack& p, const Array&) { p.set(xt, input(kN, DType::f64)); },
       {"operand 'x'", "dtype differs", "expected f32[1000] on cpu", "got f64[1000] on cpu"}},
      {"wrong dims",
       [&](VariantPack& p, const Array&) { p.set(xt, input(kN + 1)); },
       {"operand 'x'", "dims differ", "got f32[1001]"}},
      {"wrong rank",
       [&](VariantPack& p, const Array&) {
         p.set(xt, Operand::raw(host_x.data(), {1, kN}, DType::f32, Device::cpu()));
       },
       {"operand 'x'", "dims differ"}},
      {"missing output",
       [&](VariantPack& p, const Array&) {
         p = VariantPack(p.layout());  // nothing at y's position
         p.set(xt, x);
       },
       {"operand 'y'", "no buffer was passed", "(not filled)"}},
      {"wrong device",
       [&](VariantPack& p, const Array&) {
         p.set(xt, Operand::raw(host_x.data(), {kN}, DType::f32, Device::cuda(0)));
       },
       {"operand 'x'", "another device", "got f32[1000] on cuda:0"}},
      {"not row-major",
       [&](VariantPack& p, const Array&) {
         p.set(xt, Operand::raw(host_x.data(), {kN}, DType::f32, Device::cpu(), {2}));
       },
       {"operand 'x'", "row-major"}},
      {"null pointer",
       [&](VariantPack& p, const Array& y) {
         p.set(yt, y);
         p.set_data(p.layout().index_of(yt), nullptr);
       },
       {"operand 'y'", "null"}},
      // An output whose elements share one address (stride 0): each write would land on it.
      {"overlapping output",
       [&](VariantPack& p, const Array& y) {
         p.set(yt, Operand::raw(y.data(), {kN}, DType::f32, Device::cpu(), {0}));
       },
       {"operand 'y'", "share memory", "with strides [0]"}},
      {"read-only output",
       [&](VariantPack& p, const Array& y) { p.set(yt, y.as_read_only()); },
       {"operand 'y'", "read-only and the plan writes it", "read-only)"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const Array y = poisoned();
    VariantPack pack = pack_for(plans, x, y);
    c.spoil(pack, y);
    EXPECT_FALSE(compiled->run(pack.data(), {}));
    EXPECT_TRUE(all_nan(y));
    try {
      plans.execute(pack, {});
      ADD_FAILURE() << "expected InvalidArgument";
    } catch (const InvalidArgument& e) {
      const std::string what = e.what();
      for (const std::string& n : c.needles)
        EXPECT_TRUE(contains(what, n)) << "'" << what << "' lacks '" << n << "'";
      EXPECT_TRUE(contains(what, "uid ")) << what;
    }
    EXPECT_TRUE(all_nan(y));
  }
  EXPECT_EQ(rec().runs.load(), 0);

  // The same pack made legal runs.
  const Array y = poisoned();
  const VariantPack good = pack_for(plans, x, y);
  EXPECT_TRUE(compiled->run(good.data(), {}));
  EXPECT_TRUE(same_bytes(x, y));
}

TEST_F(DispatchPerCall, APlanThatRefusesWithoutARuleIsABug) {
  const Manifest m(test_spec());
  ExecutionPlans plans =
      ExecutionPlans::create_for(copy_graph(), m, cpu_props(), id_of(kSilent), {});
  ASSERT_EQ(plans.build_plans(), 0);
  const Array x = input(), y = poisoned();
  expect_throw_with<std::logic_error>([&] { plans.execute(pack_for(plans, x, y), {}); },
                                      {"refused", "names no rule"});
  EXPECT_TRUE(all_nan(y));
}

// ---- Concurrency

TEST_F(DispatchConcurrency, TwoThreadsExecuteOnePlanWithTheirOwnBuffers) {
  const Manifest m(test_spec());
  ExecutionPlans plans = ExecutionPlans::create(copy_graph(), m, cpu_props());
  ASSERT_EQ(plans.build_plans(), 0);
  constexpr int kThreads = 2;
  constexpr int kIterations = 2000;
  const int xp = plans.layout().index_of(named(plans.graph(), "x"));
  const int yp = plans.layout().index_of(named(plans.graph(), "y"));
  // Two input/output pairs per thread, made up front (the random source is not thread-safe).
  std::vector<std::vector<Array>> xs(kThreads), ys(kThreads);
  for (int t = 0; t < kThreads; ++t)
    for (int k = 0; k < 2; ++k) {
      xs[t].push_back(input());
      ys[t].push_back(poisoned());
    }
  std::atomic<int> wrong{0}, errors{0};
  std::atomic<bool> go{false};
  auto worker = [&](int t) {
    VariantPack pack = pack_for(plans, xs[t][0], ys[t][0]);  // this thread's own pack
    while (!go.load()) std::this_thread::yield();
    for (int it = 0; it < kIterations; ++it) {
      const Array& x = xs[t][it % 2];
      const Array& y = ys[t][it % 2];
      float* out = static_cast<float*>(y.data());
      std::fill(out, out + kN, std::nanf(""));
      pack.set_data(xp, x.data());
      pack.set_data(yp, y.data());
      try {
        plans.execute(pack, {});
      } catch (const std::exception&) {
        ++errors;
      }
      if (!same_bytes(x, y)) ++wrong;
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  go = true;
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(rec().runs.load(), kThreads * kIterations);
}

// ---- Autotune: ranking by measurement

TEST_F(DispatchAutotune, TimesTheEntriesThatBuildAndPinsTheFastest) {
  const Manifest m(test_spec());
  // The tiled stand-in sleeps 4 us per workspace byte: 3072, -, 512, 1536 us.
  ExecutionPlans plans =
      plan_list(m, {{id_of(kTiled), {{"tile", 256}, {"stages", 3}}, HeurMode::A, ""},
                    {id_of(kDeclinesBuild), {}, HeurMode::A, ""},
                    {id_of(kTiled), {{"tile", 64}, {"stages", 2}}, HeurMode::A, ""},
                    {id_of(kTiled), {{"tile", 128}, {"stages", 3}}, HeurMode::A, ""}});
  const Array x = input(), y = poisoned();
  const VariantPack pack = pack_for(plans, x, y);
  const std::vector<plan::AutotuneTiming> t = plan::autotune(plans, pack, {}, {8, 1, 5});
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].index, 0);
  EXPECT_EQ(t[1].index, 2);
  EXPECT_EQ(t[2].index, 3);
  EXPECT_GE(t[0].median_ms, 3.072);
  EXPECT_GE(t[1].median_ms, 0.512);
  EXPECT_LT(t[1].median_ms, t[0].median_ms);
  EXPECT_LT(t[1].median_ms, t[2].median_ms);
  EXPECT_EQ(plans.selected(), 2);
  EXPECT_EQ(plans.workspace_size(), 128u);
  EXPECT_TRUE(same_bytes(x, y));  // the runs wrote the pack's output
  ASSERT_EQ(plans.declines().size(), 1u);
  EXPECT_EQ(plans.declines()[0].first, 1);
  EXPECT_EQ(rec().runs.load(), 3 * (1 + 5));
  EXPECT_FALSE(rec().run_without_workspace.load());

  // execute() runs the pinned entry.
  const Array y2 = poisoned();
  plans.execute(pack_for(plans, x, y2), {});
  EXPECT_TRUE(same_bytes(x, y2));
  EXPECT_TRUE(contains(plans.describe(), "* 2 tiled[stages=2,tile=64]")) << plans.describe();
}

TEST_F(DispatchAutotune, MaxEntriesBoundsWhatIsTimed) {
  const Manifest m(test_spec());
  ExecutionPlans plans =
      plan_list(m, {{id_of(kTiled), {{"tile", 128}, {"stages", 2}}, HeurMode::A, ""},
                    {id_of(kTiled), {{"tile", 64}, {"stages", 2}}, HeurMode::A, ""}});
  const Array x = input(), y = poisoned();
  const auto t = plan::autotune(plans, pack_for(plans, x, y), {}, {1, 0, 1});
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].index, 0);
  EXPECT_EQ(plans.selected(), 0);
  EXPECT_FALSE(plans.is_built(1));  // never tried
}

TEST_F(DispatchAutotune, EveryEntryRunsWithTheWorkspaceItAsks) {
  const Manifest m(test_spec());
  // 4 bytes first (as many as an undefined Array reports), then 128.
  ExecutionPlans plans =
      plan_list(m, {{id_of(kTiled), {{"tile", 2}, {"stages", 2}}, HeurMode::A, ""},
                    {id_of(kTiled), {{"tile", 64}, {"stages", 2}}, HeurMode::A, ""}});
  const Array x = input(), y = poisoned();
  const auto t = plan::autotune(plans, pack_for(plans, x, y), {}, {8, 1, 2});
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(rec().runs.load(), 2 * 3);
  EXPECT_FALSE(rec().run_without_workspace.load());
}

TEST_F(DispatchAutotune, BadOptionsAndPacksAreRefusedAndTheSelectionStays) {
  const Manifest m(test_spec());
  ExecutionPlans plans =
      plan_list(m, {{id_of(kCopy), {}, HeurMode::A, ""},
                    {id_of(kTiled), {{"tile", 64}, {"stages", 2}}, HeurMode::A, ""}});
  plans.select_plan(1);
  plans.build_plans();
  const Array x = input(), y = poisoned();
  const VariantPack pack = pack_for(plans, x, y);
  expect_invalid(
      [&] {
        plan::autotune(plans, pack, {}, {0, 1, 1});
      },
      "options.max_entries must be >= 1, got 0");
  expect_invalid(
      [&] {
        plan::autotune(plans, pack, {}, {1, -1, 1});
      },
      "options.warmup must be >= 0");
  expect_invalid([&] { plan::autotune(plans, pack, {}, {1, 1, 0}); }, "options.reps must be >= 1");
  ExecutionPlans other = ExecutionPlans::create(copy_graph(DType::f32, "other"), m, cpu_props());
  expect_invalid([&] { plan::autotune(other, pack, {}); },
                 "variant pack was made for another plan's layout");
  // A pack whose operand breaks a rule: the entry's checker names it; nothing is pinned anew.
  const Array small = input(kN - 1);
  VariantPack bad(plans.layout());
  bad.set(named(plans.graph(), "x"), small).set(named(plans.graph(), "y"), y);
  EXPECT_THROW(plan::autotune(plans, bad, {}), InvalidArgument);
  EXPECT_EQ(plans.selected(), 1);
  EXPECT_EQ(rec().runs.load(), 0);
}

TEST_F(DispatchAutotune, WhenNothingBuildsNotSupportedListsTheDeclines) {
  const Manifest m(test_spec());
  ExecutionPlans plans = plan_list(m, {{id_of(kDeclinesCheck), {}, HeurMode::A, ""},
                                       {id_of(kDeclinesBuild), {}, HeurMode::A, ""}});
  const Array x = input(), y = poisoned();
  expect_throw_with<NotSupported>([&] { plan::autotune(plans, pack_for(plans, x, y), {}); },
                                  {"1 declines_build: declines_build: no kernel for this shape"});
  EXPECT_EQ(plans.selected(), -1);
  EXPECT_TRUE(all_nan(y));
}

}  // namespace
}  // namespace eagle::test
