#pragma once
// One rank's part of the training run: data, model, the epochs, evaluation, checkpoints, the report.
#include "options.hpp"

namespace fashion_mnist {

/// Trains and evaluates on the current idist configuration (serial, or one rank of an initialized
/// backend). Rank 0 prints progress lines on stderr and the JSON report on stdout.
/// @throws what loading the data, a collective or a checkpoint throws.
void train(const Options& o);

}  // namespace fashion_mnist
