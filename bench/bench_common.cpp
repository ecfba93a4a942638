#include "bench_common.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

namespace eagle::bench {

std::vector<Stats> measure(int warmup, int batches, const std::vector<Batch>& variants) {
  const std::size_t n = variants.size();
  std::vector<std::vector<double>> samples(n);
  for (int b = 0; b < warmup + batches; ++b) {
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t v = (static_cast<std::size_t>(b) + k) % n;
      const double ns = variants[v]();
      if (b >= warmup) samples[v].push_back(ns);
    }
  }
  std::vector<Stats> out(n);
  for (std::size_t v = 0; v < n; ++v) {
    std::vector<double>& s = samples[v];
    std::sort(s.begin(), s.end());
    const std::size_t mid = s.size() / 2;
    out[v].median_ns = s.size() % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
    out[v].min_ns = s.front();
  }
  return out;
}

Peers::Peers(const std::string& path) : path_(path) {
  if (path.empty()) return;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("--peers: cannot read '" + path + "'");
  for (std::string line; std::getline(in, line);) {
    const std::size_t space = line.find(' ');
    if (space == std::string::npos || space == 0) continue;
    lines_.emplace_back(line.substr(0, space), line.substr(space + 1));
  }
}

std::optional<Stats> Peers::find(const std::string& name, std::string& why) const {
  if (path_.empty()) {
    why = "no peer timings given (--peers FILE)";
    return std::nullopt;
  }
  for (const auto& [key, rest] : lines_) {
    if (key != name) continue;
    std::istringstream fields(rest);
    double median_ms = 0, min_ms = 0;
    if (rest.rfind("error:", 0) != 0 && fields >> median_ms >> min_ms)
      return Stats{median_ms * 1e6, min_ms * 1e6};
    why = "the peer cannot run it here: " + rest;
    return std::nullopt;
  }
  why = "the peer did not measure '" + name + "' in " + path_;
  return std::nullopt;
}

void compare_with_peer(Report& report, const Peers& peers, const std::string& what,
                       const Stats& eagle, const std::string& peer_label, const std::string& name,
                       std::optional<double> goal, const std::string& extra) {
  std::string why;
  if (const std::optional<Stats> peer = peers.find(name, why)) {
    report.compare(what, eagle, peer_label, *peer, goal, extra);
  } else {
    report.note(what + ": eagle " + format_ns(eagle.median_ns) + "; no ratio: " + why);
  }
}

std::string format_ns(double ns) {
  char buf[32];
  const double size = std::fabs(ns);  // overheads can come out negative within the noise
  if (size < 1e3) {
    std::snprintf(buf, sizeof buf, "%7.1f ns", ns);
  } else if (size < 1e6) {
    std::snprintf(buf, sizeof buf, "%7.3f us", ns / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%7.3f ms", ns / 1e6);
  }
  return buf;
}

namespace {

std::string pad(std::string s, std::size_t width) {
  if (s.size() < width) s.resize(width, ' ');
  return s;
}

std::string format_stats(const Stats& s) {
  return format_ns(s.median_ns) + " (min " + format_ns(s.min_ns) + ")";
}

}  // namespace

void Report::section(const std::string& title) {
  std::printf("\n== %s\n", title.c_str());
}

void Report::note(const std::string& text) {
  std::printf("   %s\n", text.c_str());
}

void Report::compare(const std::string& what, const Stats& eagle, const std::string& peer,
                     const Stats& raw, std::optional<double> goal, const std::string& extra) {
  const double ratio = eagle.median_ns / raw.median_ns;
  char ratio_text[64];
  std::snprintf(ratio_text, sizeof ratio_text, "ratio %6.3f", ratio);
  std::string line = pad(what, 46) + "  eagle " + format_stats(eagle) + "  " + pad(peer, 18) + " " +
                     format_stats(raw) + "  " + ratio_text;
  if (goal) {
    const bool ok = ratio <= *goal;
    char goal_text[64];
    std::snprintf(goal_text, sizeof goal_text, "  goal <= %.2f %s", *goal, ok ? "PASS" : "MISS");
    line += goal_text;
    tally(ok);
  }
  if (!extra.empty()) line += "  " + extra;
  std::printf("%s\n", line.c_str());
}

void Report::check(const std::string& what, bool ok, const std::string& detail) {
  std::printf("%s  %s  %s\n", pad(what, 46).c_str(), detail.c_str(), ok ? "PASS" : "MISS");
  tally(ok);
}

void Report::tally(bool ok) {
  ++(ok ? passed_ : missed_);
}

void Report::summary() const {
  std::printf("\nsummary: %d PASS, %d MISS\n", passed_, missed_);
}

Graph record_chain(const Array& x0, int length) {
  return Graph::record([&](Recorder& r) {
    const Value x = r.param("x", x0);
    Value v = x;
    for (int k = 0; k < length; ++k) v = r.call(kernels::axpy(), {v, x, kAlpha});
    r.result(v);
  });
}

std::vector<float> chain_reference(const std::vector<float>& x, int length) {
  std::vector<float> v = x;
  const float alpha = static_cast<float>(kAlpha);
  for (int k = 0; k < length; ++k)
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = alpha * v[i] + x[i];
  return v;
}

std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& f : v) f = dist(gen);
  return v;
}

void expect_close(const std::string& what, const std::vector<float>& got,
                  const std::vector<float>& want) {
  if (got.size() != want.size())
    throw Error(what + ": " + std::to_string(got.size()) + " values, expected " +
                std::to_string(want.size()));
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i])) throw Error(what + ": value " + std::to_string(i) + " is NaN");
    diff += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    norm += static_cast<double>(want[i]) * want[i];
  }
  const double rel = std::sqrt(diff / norm);
  if (!(rel <= 1e-5))
    throw Error(what + ": relative error " + std::to_string(rel) + " against the reference");
}

}  // namespace eagle::bench
