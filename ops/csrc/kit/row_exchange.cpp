#include <tjit/kit/row_exchange.h>

#include <ATen/ops/zeros.h>

namespace tjit::kit {

at::Tensor row_exchange_workspace(int64_t rows, int64_t chunks, const at::Tensor& like) {
  return at::zeros({2 + rows * chunks}, like.options().dtype(at::kLong));
}

}  // namespace tjit::kit
