#pragma once
/// @file
/// The LibTorch layer of idist (CMake target idist::torch, library libidist_torch): tensor
/// collectives, auto_model (DistributedDataParallel-style gradient averaging) with no_sync,
/// auto_optim, join (uneven inputs), idist::nn::SyncBatchNorm and convert_sync_batchnorm,
/// auto_dataloader (map-style and stream datasets), DistributedSampler, DistributedProxySampler and
/// WeightedRandomSampler, Checkpoint (ignite's Checkpoint with its DiskSaver), ZeroRedundancyOptimizer.
/// Included by idist/idist.hpp when <torch/torch.h> is on the include path.

#include <torch/torch.h>

#include "idist/collectives.hpp"
#include "idist/context.hpp"
#include "idist/torch/auto_dataloader.hpp"
#include "idist/torch/auto_model.hpp"
#include "idist/torch/auto_optim.hpp"
#include "idist/torch/checkpoint.hpp"
#include "idist/torch/collectives.hpp"
#include "idist/torch/comm_hooks.hpp"
#include "idist/torch/dtype.hpp"
#include "idist/torch/join.hpp"
#include "idist/torch/nn/convert_sync_batch_norm.hpp"
#include "idist/torch/nn/sync_batch_norm.hpp"
#include "idist/torch/samplers.hpp"
#include "idist/torch/zero.hpp"
