#pragma once
// LibTorch archives as bytes, and copied key by key: what moving an optimizer's per-parameter state
// between ranks and between layouts needs (InputArchive cannot be written, OutputArchive not read).
#include <optional>
#include <string>

#include <c10/core/Device.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

namespace idist::detail {

/// The serialized form of `archive`.
std::string archive_bytes(torch::serialize::OutputArchive& archive);

/// Loads `archive` from `bytes`, tensors mapped to `device` when given.
void load_archive(torch::serialize::InputArchive& archive, const std::string& bytes,
                  std::optional<c10::Device> device = std::nullopt);

/// Writes every entry of `from` into `to`, recursively: nested archives, tensors (as parameters
/// or buffers, as they were written), other values. Tensors are moved to `device` when given.
void copy_archive(torch::serialize::InputArchive& from, torch::serialize::OutputArchive& to,
                  std::optional<c10::Device> device = std::nullopt);

}  // namespace idist::detail
