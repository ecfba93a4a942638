// Capacity buckets fed by a packing loader: graphs for T = 256, 1024, 4096 recorded from one
// function, sharing one arena, fed through prefix views of max-sized inputs, and picked per batch
// by the active token count the loader knows on the host.
// Shows: data::PackedLoader (look-ahead packing), BucketSet (select, backing, run), stale results.
// Pitfalls: a bucket's results live in the shared arena: read or copy them before the next run
// of any bucket (a stale read throws); params are filled through backing(), not bound.
#include <cstdio>
#include <vector>

#include "eagle/eagle.hpp"

using namespace eagle;

bool run(Device device) {
  std::vector<data::Segment> docs;  // synthetic documents of zipf lengths
  for (int64_t n : data::zipf_lengths(20000, 60, 5)) {
    data::Segment s;
    s.tokens.assign(static_cast<std::size_t>(std::min<int64_t>(n, 4096)), 7);
    docs.push_back(s);
  }
  const int64_t slots = 16;
  bool sums_ok = true;
  // [readme:buckets]
  data::PackedLoader loader(data::cycle_segments(&docs), {4096, slots}, /*lookahead=*/2);
  BucketSet buckets(
      {256, 1024, 4096},
      {{"ids", {4096}, DType::i32, true}, {"cu_seqlens", {slots + 1}, DType::i32, false}}, device,
      [](Recorder& r, const BucketSet::Bucket& b) {  // recorded once per capacity
        Value ids = r.param("ids", b.input("ids"));  // rows [0, b.capacity) of the backing array
        Value cu = r.param("cu_seqlens", b.input("cu_seqlens"));
        ragged::validate(r, cu, b.capacity);
        r.result(r.call(kernels::sum(), {ids}));  // a PackedBatch's padding ids are 0
      });
  for (int step = 0; step < 4; ++step) {
    data::PackedBatch batch = *loader.next();  // at most 4096 tokens in at most 16 sequences
    const int bucket = buckets.select(batch.active_tokens);  // host-known L, no device read
    const int64_t rows = buckets.capacities()[static_cast<std::size_t>(bucket)];
    batch.input_ids.resize(static_cast<std::size_t>(rows));  // only the bucket's rows travel
    buckets.backing("ids")
        .slice(0, 0, rows)
        .copy_from(Array::from(batch.input_ids, {rows}, Device::cpu()));
    buckets.backing("cu_seqlens")
        .copy_from(Array::from(batch.cu_seqlens, {slots + 1}, Device::cpu()));
    const BucketResults out = buckets.run(batch.active_tokens);
    std::printf("L = %lld in M = %lld -> bucket T = %lld, sum %d\n",
                static_cast<long long>(batch.active_tokens),
                static_cast<long long>(batch.active_sequences),
                static_cast<long long>(out.capacity()), out[0].to_vector<int32_t>()[0]);
    sums_ok = sums_ok && out[0].to_vector<int32_t>()[0] == 7 * batch.active_tokens;  // ids are 7
  }
  // [/readme]
  return sums_ok &&
         buckets.arena_bytes() + buckets.backing_bytes() <= buckets.largest_alone_bytes() * 11 / 10;
}

int main() {
  for (Device device : {Device::cpu(), Device::cuda(0)}) {
    if (device.is_cuda() && !cuda_available()) continue;
    if (!run(device)) {
      std::printf("buckets: wrong result on %s\n", device.str().c_str());
      return 1;
    }
  }
  return 0;
}
