#pragma once
/// @file
/// Built-in communication hooks for idist::register_comm_hook (torch.distributed.algorithms.
/// ddp_comm_hooks): allreduce (auto_model's default behaviour, as a hook), fp16_compress and
/// bf16_compress (all-reduce a half-width copy of the bucket), and powersgd (low-rank compression,
/// options in idist/torch/powersgd_hook.hpp). Compiled into idist_torch.
///
/// bfloat16: every idist backend reduces it — mpi and gloo with idist's own reduction functions
/// (summed in float32 per element pair, rounded back), nccl natively (NCCL >= 2.10, else staged
/// through the host) — so bf16_compress needs no fallback on a backend; a bucket that is not
/// floating point is all-reduced uncompressed.

#include "idist/torch/comm_hook.hpp"
#include "idist/torch/powersgd_hook.hpp"

namespace idist::comm_hooks {

/// All-reduces each bucket and divides by the world size: what auto_model does without a hook
/// (torch.distributed.algorithms.ddp_comm_hooks.default_hooks.allreduce_hook). Useful as a
/// baseline, or to wrap.
CommHook allreduce();

/// Halves the bytes on the wire: the bucket is cast to float16 (after dividing by the world size),
/// all-reduced, and cast back (default_hooks.fp16_compress_hook). float16 keeps 11 significant
/// bits and overflows past 65504: fine for gradients of ordinary scale. The hook owns one wire
/// buffer per bucket, reused every iteration: register one hook per model.
CommHook fp16_compress();

/// As fp16_compress with bfloat16 (default_hooks.bf16_compress_hook): float32's range, 8
/// significant bits. Every idist backend reduces bfloat16 (see the file comment). One hook per
/// model, as fp16_compress.
CommHook bf16_compress();

/// PowerSGD gradient compression (powerSGD_hook.powerSGD_hook; Vogels et al., NeurIPS 2019):
/// each gradient matrix of n x m elements is sent as two rank-r factors of (n + m) x r elements.
/// See PowerSGDOptions (idist/torch/powersgd_hook.hpp) for the algorithm and its options. The
/// returned hook owns its state (error feedback, warm-start matrices, iteration count): register one
/// hook per model.
/// @throws ValueError for invalid options (see PowerSGDOptions).
CommHook powersgd(const PowerSGDOptions& options = {});

}  // namespace idist::comm_hooks
