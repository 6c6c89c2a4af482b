#pragma once
// Where a loaded optimizer state goes: PyTorch's Optimizer.load_state_dict casts each state tensor to
// its parameter's device, and floating state to the parameter's dtype (step counters excepted), so
// that a state saved on other devices, or for parameters of another dtype, steps the parameters as
// they are now. LibTorch's load() keeps the tensors where the archive put them; this does the rest.
#include <cstddef>

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

namespace idist::checkpoint {

/// The state `optimizer` keeps for its parameter `param`, or nullptr (none yet, or not its parameter).
torch::optim::OptimizerParamState* state_of(torch::optim::Optimizer& optimizer, const at::Tensor& param);

/// Moves the per-parameter state of `optimizer` (LibTorch's SGD, Adam, AdamW, Adagrad, RMSprop and
/// LBFGS) to the device of the parameter it belongs to, in the parameter's dtype when the parameter
/// is floating point (PyTorch's rule); their step counters are integers and stay as they are. The
/// state of other optimizers is left as their load() made it. Returns the number of tensors moved.
std::size_t place_state_on_parameters(torch::optim::Optimizer& optimizer);

}  // namespace idist::checkpoint
