// The task list of the flat schedule: chunk j's sequence and rows, on the host (the header's
// functions) and on each device (the chunk_tasks kernel), against an enumeration of the chunks.
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "eagle/ragged/capacity.hpp"
#include "eagle/ragged/kernels.hpp"
#include "eagle/ragged/schedule.hpp"
#include "test_util.hpp"

namespace eagle::test {
namespace {

// Every chunk of a valid batch in order: {sequence, row_begin, row_end}.
std::vector<std::array<int32_t, 3>> enumerate(const std::vector<int32_t>& cu, int64_t chunk) {
  std::vector<std::array<int32_t, 3>> out;
  for (std::size_t s = 0; s + 1 < cu.size(); ++s)
    for (int64_t r = cu[s]; r < cu[s + 1]; r += chunk)
      out.push_back({static_cast<int32_t>(s), static_cast<int32_t>(r),
                     static_cast<int32_t>(std::min<int64_t>(r + chunk, cu[s + 1]))});
  return out;
}

std::vector<int32_t> offsets_of(const std::vector<int32_t>& cu, int64_t chunk) {
  std::vector<int32_t> o(cu.size(), 0);
  for (std::size_t s = 1; s < cu.size(); ++s)
    o[s] = static_cast<int32_t>(o[s - 1] + (cu[s] - cu[s - 1] + chunk - 1) / chunk);
  return o;
}

const std::vector<std::vector<int32_t>>& batches() {
  static const std::vector<std::vector<int32_t>> b = {
      {0, 1, 4, 4, 5, 9, 40},  // lengths 1, C - 1, 0, C, C + 1 (C = 4), long
      {0, 0, 0, 17, 17},       // empty sequences around one
      {0, 40, 40, 40},         // one fills T, a repeated tail
      {0, 0, 0},               // nothing active
      {0, 1, 2, 3, 4, 5, 6, 7, 8, 40},
  };
  return b;
}

TEST(RaggedSchedule, HostTasksAreTheChunksInOrder) {
  const int64_t tokens = 40;
  for (int64_t c : {1, 4, 16})
    for (const auto& cu : batches()) {
      const std::vector<int32_t> off = offsets_of(cu, c);
      const int64_t slots = static_cast<int64_t>(cu.size()) - 1;
      const auto want = enumerate(cu, c);
      ASSERT_EQ(off.back(), static_cast<int32_t>(want.size()));
      for (int64_t j = 0; j < ragged::chunk_capacity(tokens, slots, c) + 2; ++j) {
        const ragged::ChunkTask t = ragged::chunk_task(cu.data(), off.data(), slots, tokens, c, j);
        if (j < static_cast<int64_t>(want.size())) {
          EXPECT_EQ(t.sequence, want[j][0]) << "C " << c << " chunk " << j;
          EXPECT_EQ(t.row_begin, want[j][1]);
          EXPECT_EQ(t.row_end, want[j][2]);
        } else {
          EXPECT_EQ(t.sequence, -1);
        }
      }
    }
}

TEST(RaggedSchedule, BadMetadataKeepsEveryTaskInBounds) {
  const int64_t tokens = 10, c = 3;
  const std::vector<int32_t> cu = {0, 7, 3, 55, -5};
  // The offsets chunk_offsets computes from the clamped lengths 7, 0, 3, 0.
  const std::vector<int32_t> off = {0, 3, 3, 4, 4};
  for (int64_t j = 0; j < 8; ++j) {
    const ragged::ChunkTask t = ragged::chunk_task(cu.data(), off.data(), 4, tokens, c, j);
    EXPECT_LE(0, t.row_begin);
    EXPECT_LE(t.row_begin, t.row_end);
    EXPECT_LE(t.row_end, tokens);
  }
}

class RaggedTasks : public OnDeviceWithStream {};

TEST_P(RaggedTasks, TheKernelListsTheFlatSchedulesTasks) {
  const int64_t tokens = 40;
  for (int64_t c : {1, 4, 16})
    for (const auto& cu : batches()) {
      const int64_t slots = static_cast<int64_t>(cu.size()) - 1;
      const int64_t g = ragged::chunk_capacity(tokens, slots, c);
      const Array cu_a = Array::from(cu, {slots + 1}, device());
      const Array off = launch(ragged::chunk_offsets(), {cu_a}, {tokens, c}, stream(), team_)[0];
      const Array tasks =
          launch(ragged::chunk_tasks(), {cu_a, off}, {tokens, c, g}, stream(), team_)[0];
      stream().synchronize();
      ASSERT_EQ(tasks.shape(), (Shape{g, 3}));
      const std::vector<int32_t> got = tasks.to_vector<int32_t>();
      const auto want = enumerate(cu, c);
      for (int64_t j = 0; j < g; ++j) {
        const std::array<int32_t, 3> w =
            j < static_cast<int64_t>(want.size()) ? want[j] : std::array<int32_t, 3>{-1, 0, 0};
        for (int k = 0; k < 3; ++k) EXPECT_EQ(got[3 * j + k], w[k]) << "C " << c << " task " << j;
      }
    }
}

EAGLE_ON_EVERY_DEVICE(RaggedTasks);

}  // namespace
}  // namespace eagle::test
