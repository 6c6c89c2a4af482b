// Consumer of an installed idist's LibTorch layer (serial): auto_model, auto_optim, auto_dataloader
// and a tensor collective compile, link and behave; exits non-zero on any mismatch.
#include <cstdio>

#include <torch/torch.h>

#include <idist/idist.hpp>

int main() {
  int failures = 0;
  auto fail = [&](const char* what) {
    std::fprintf(stderr, "consumer_torch: FAILED: %s\n", what);
    ++failures;
  };
  try {
    torch::manual_seed(0);
    auto model = idist::auto_model(std::make_shared<torch::nn::LinearImpl>(4, 2));
    auto optimizer = idist::auto_optim(std::make_shared<torch::optim::SGD>(model->parameters(), 0.1));
    auto dataset = torch::data::datasets::TensorDataset(torch::randn({10, 4}))
                       .map(torch::data::transforms::Stack<torch::data::TensorExample>());
    auto loader =
        idist::auto_dataloader(std::move(dataset), idist::DataLoaderOptions{.batch_size = 4, .drop_last = false});
    loader.set_epoch(0);
    std::int64_t seen = 0;
    for (auto& batch : loader) {
      optimizer->zero_grad();
      model->forward(batch.data).sum().backward();
      optimizer->step();
      seen += batch.data.size(0);
    }
    if (seen != 10) fail("auto_dataloader did not visit the 10 examples once");
    torch::Tensor t = torch::arange(3, torch::kFloat32);
    if (!idist::all_reduce(t).equal(torch::arange(3, torch::kFloat32))) fail("serial all_reduce of a tensor");
    if (idist::to_torch_device(idist::device()) != torch::Device(torch::kCPU)) fail("device() is cpu");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer_torch: exception: %s\n", e.what());
    return 2;
  }
  if (failures == 0) std::printf("consumer_torch: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
