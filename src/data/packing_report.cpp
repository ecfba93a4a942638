#include "eagle/data/packing_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <map>

#include "eagle/core/error.hpp"
#include "eagle/data/packing.hpp"

namespace eagle::data {

namespace {

// The q-quantile (0 < q <= 1) of sorted values: the smallest v with at least q of them <= v.
int64_t quantile(const std::vector<int64_t>& sorted, double q) {
  const auto n = static_cast<double>(sorted.size());
  const auto k = static_cast<std::size_t>(std::max(1.0, std::ceil(q * n)));
  return sorted[k - 1];
}

int64_t next_power_of_two(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

}  // namespace

PackingStats measure_packing(const std::vector<int64_t>& lengths, int64_t tokens,
                             int64_t lookahead) {
  if (tokens < 1 || lookahead < 1)
    throw InvalidArgument("measure_packing: need T >= 1 and B >= 1, got T = " +
                          std::to_string(tokens) + ", B = " + std::to_string(lookahead));
  for (std::size_t i = 0; i < lengths.size(); ++i)
    if (lengths[i] < 1 || lengths[i] > tokens)
      throw InvalidArgument("measure_packing: length " + std::to_string(lengths[i]) + " (entry " +
                            std::to_string(i) + ") is outside [1, T = " + std::to_string(tokens) +
                            "]: split the data at a segment cap <= T first");
  const BatchCapacity capacity{tokens, lookahead};
  const auto b = static_cast<std::size_t>(lookahead);
  std::deque<int64_t> buffer;
  std::size_t next = 0;
  std::vector<int64_t> fills, ms;  // of the batches made with a full buffer
  std::vector<int64_t> all_fills, all_ms;
  while (true) {
    while (buffer.size() < b && next < lengths.size()) buffer.push_back(lengths[next++]);
    if (buffer.empty()) break;
    const bool full = buffer.size() == b;
    const std::vector<std::size_t> chosen = select_candidates(buffer, capacity);
    int64_t l = 0;
    for (std::size_t i : chosen) l += buffer[i];
    (full ? fills : all_fills).push_back(l);
    (full ? ms : all_ms).push_back(static_cast<int64_t>(chosen.size()));
    remove_taken(buffer, chosen);
  }
  if (fills.empty()) {  // the data never filled the buffer: every batch counts
    fills = all_fills;
    ms = all_ms;
  }
  PackingStats s;
  s.tokens = tokens;
  s.lookahead = lookahead;
  s.batches = static_cast<int64_t>(fills.size());
  if (fills.empty()) return s;
  double fill = 0, padding = 0;
  for (int64_t l : fills) {
    fill += static_cast<double>(l) / static_cast<double>(tokens);
    padding += static_cast<double>(tokens - l);
  }
  s.mean_fill = fill / static_cast<double>(fills.size());
  s.mean_padding = padding / static_cast<double>(fills.size());
  std::sort(ms.begin(), ms.end());
  s.median_m = quantile(ms, 0.5);
  s.p99_m = quantile(ms, 0.99);
  s.max_m = ms.back();
  s.active_tokens = std::move(fills);
  return s;
}

std::vector<PackingAdvice> advise_packing(const std::vector<PackingStats>& stats) {
  std::map<int64_t, std::vector<const PackingStats*>> by_t;
  for (const PackingStats& s : stats)
    if (s.batches > 0) by_t[s.tokens].push_back(&s);
  std::vector<PackingAdvice> out;
  for (auto& [t, rows] : by_t) {
    std::sort(rows.begin(), rows.end(), [](const PackingStats* a, const PackingStats* b) {
      return a->lookahead < b->lookahead;
    });
    double best = 0;
    for (const PackingStats* r : rows) best = std::max(best, r->mean_fill);
    const PackingStats* pick = rows.back();
    for (const PackingStats* r : rows)
      if (r->mean_fill >= best - 0.005) {
        pick = r;
        break;
      }
    PackingAdvice a;
    a.tokens = t;
    a.lookahead = pick->lookahead;
    a.slots = next_power_of_two(pick->max_m);
    char text[200];
    if (pick->mean_fill >= 0.97) {
      a.buckets = {t};
      std::snprintf(text, sizeof text, "one graph: mean fill %.2f%% with B = %lld",
                    100 * pick->mean_fill, static_cast<long long>(pick->lookahead));
    } else {
      std::vector<int64_t> l = pick->active_tokens;
      std::sort(l.begin(), l.end());
      for (double q : {0.5, 0.9}) {
        const int64_t cap = (quantile(l, q) + 127) / 128 * 128;
        if (cap < t && (a.buckets.empty() || cap > a.buckets.back())) a.buckets.push_back(cap);
      }
      a.buckets.push_back(t);
      std::snprintf(text, sizeof text,
                    "mean fill %.2f%% with B = %lld: buckets at the 50%% and 90%% quantiles of L "
                    "bound the padding",
                    100 * pick->mean_fill, static_cast<long long>(pick->lookahead));
    }
    a.reason = text;
    out.push_back(a);
  }
  return out;
}

}  // namespace eagle::data
