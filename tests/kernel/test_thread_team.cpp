// Tests of the thread team CPU kernels split their work over.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "eagle/eagle.hpp"

namespace eagle {
namespace {

TEST(ThreadTeamTest, Size) {
  EXPECT_EQ(ThreadTeam(2).size(), 2);
  EXPECT_EQ(ThreadTeam(1).size(), 1);
  const int hw = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  EXPECT_EQ(ThreadTeam(0).size(), hw);
  EXPECT_EQ(ThreadTeam(-3).size(), hw);
}

TEST(ThreadTeamTest, ParallelForCoversEveryIndexOnce) {
  for (int threads : {1, 2, 4}) {
    SCOPED_TRACE(threads);
    const ThreadTeam team(threads);
    for (int64_t n : {int64_t{1}, int64_t{1999}, int64_t{2000}, int64_t{100003}}) {
      SCOPED_TRACE(n);
      const int64_t grain = 1000;
      std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
      std::mutex mutex;
      std::vector<std::pair<int64_t, int64_t>> chunks;
      team.parallel_for(n, grain, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
        std::lock_guard<std::mutex> lock(mutex);
        chunks.emplace_back(begin, end);
      });
      int64_t wrong = 0;
      for (auto& h : hits) wrong += h.load() != 1;
      EXPECT_EQ(wrong, 0);
      ASSERT_FALSE(chunks.empty());
      // Chunks are at least `grain` long (a single chunk holds all of a small range).
      std::size_t short_chunks = 0;
      int64_t shortest = n;
      for (const auto& [b, e] : chunks) {
        EXPECT_LT(b, e);
        short_chunks += e - b < std::min(grain, n);
        shortest = std::min(shortest, e - b);
      }
      EXPECT_EQ(short_chunks, 0u) << "of " << chunks.size() << " chunks; the shortest has "
                                  << shortest << " indices, the grain is " << grain;
      if (n < 2 * grain || threads == 1) {
        EXPECT_EQ(chunks.size(), 1u);
      }
    }
  }
}

TEST(ThreadTeamTest, SmallWorkRunsInlineOnTheCaller) {
  const ThreadTeam team(4);
  std::thread::id where;
  int calls = 0;
  team.parallel_for(100, 64, [&](int64_t begin, int64_t end) {
    where = std::this_thread::get_id();
    ++calls;
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 100);
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(where, std::this_thread::get_id());
  team.parallel_for(0, 64, [&](int64_t, int64_t) { ++calls; });
  team.parallel_for(-5, 64, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 1);
}

TEST(ThreadTeamTest, TasksRunEachIndexOnce) {
  for (int threads : {1, 2, 3}) {
    const ThreadTeam team(threads);
    for (int n : {0, 1, 2, 7, 64}) {
      std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
      team.tasks(n, [&](int i) { hits[i].fetch_add(1); });
      for (int i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << threads << " " << n << " " << i;
    }
  }
}

TEST(ThreadTeamTest, NeverUsesMoreThreadsThanTheTeamHas) {
  const ThreadTeam team(2);
  std::mutex mutex;
  std::set<std::thread::id> threads;
  team.parallel_for(1 << 20, 1 << 10, [&](int64_t, int64_t) {
    std::lock_guard<std::mutex> lock(mutex);
    threads.insert(std::this_thread::get_id());
  });
  EXPECT_GE(threads.size(), 1u);
  EXPECT_LE(threads.size(), 2u);
  std::set<std::thread::id> task_threads;
  team.tasks(64, [&](int) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    std::lock_guard<std::mutex> lock(mutex);
    task_threads.insert(std::this_thread::get_id());
  });
  EXPECT_LE(task_threads.size(), 2u);
}
}  // namespace
}  // namespace eagle
