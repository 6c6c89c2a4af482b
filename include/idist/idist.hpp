#pragma once
/// @file
/// Umbrella header: `#include <idist/idist.hpp>` brings in the whole public API of idist, the C++
/// counterpart of PyTorch-Ignite's ignite.distributed. When LibTorch's headers are on the include
/// path it also brings in the LibTorch layer (tensor collectives, auto_model, auto_optim,
/// auto_dataloader, DistributedProxySampler); define IDIST_NO_TORCH to leave it out.

#include "idist/collectives.hpp"
#include "idist/computation_model.hpp"
#include "idist/config.hpp"
#include "idist/context.hpp"
#include "idist/debug.hpp"
#include "idist/elastic.hpp"
#include "idist/error.hpp"
#include "idist/group.hpp"
#include "idist/helpers.hpp"
#include "idist/types.hpp"
#include "idist/work.hpp"
#if __has_include("idist/launcher.hpp")
#include "idist/launcher.hpp"
#endif

#if !defined(IDIST_NO_TORCH) && __has_include(<torch/torch.h>)
#include "idist/torch.hpp"
#endif
