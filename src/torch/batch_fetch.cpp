#include "idist/torch/batch_fetch.hpp"

#include <cstdint>

#include <ATen/ATen.h>

namespace idist::detail {

at::Tensor index_tensor(c10::ArrayRef<std::size_t> indices) {
  at::Tensor t = at::empty({std::int64_t(indices.size())}, at::kLong);
  auto* out = t.data_ptr<std::int64_t>();
  for (std::size_t i = 0; i < indices.size(); ++i) out[i] = std::int64_t(indices[i]);
  return t;
}

}  // namespace idist::detail
