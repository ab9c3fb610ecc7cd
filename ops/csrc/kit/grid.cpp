#include <tjit/kit/grid.h>

#include <tjit/device_properties.h>

#include <c10/util/Exception.h>

namespace tjit::kit {

uint32_t blocks_for(int64_t n, int64_t block, const char* op) {
  const int64_t blocks = (n + block - 1) / block;
  TORCH_CHECK(blocks <= int64_t{0x7fffffff}, op, ": ", n, " elements need ", blocks,
              " programs, more than a CUDA grid holds");
  return static_cast<uint32_t>(blocks);
}

int64_t next_power_of_2(int64_t n) {
  int64_t p = 1;
  while (p < n) {
    p <<= 1;
  }
  return p;
}

int planning_multiprocessors(const at::Tensor& t) { return t.is_cuda() ? multiprocessor_count(t.device()) : 4; }

}  // namespace tjit::kit
