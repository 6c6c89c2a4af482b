#pragma once
// The checkpoint directory on the saving rank: file names (ignite's default pattern), listing,
// the checks of ignite's DiskSaver, and removal of what a crashed save left.
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace idist::checkpoint {

/// `{prefix}_{name}`, or `{name}` without a prefix: what precedes `_{iteration}.pt`.
std::string base_name(const std::string& prefix, const std::string& name);

/// `{base}_{iteration}.pt`.
std::string file_name(const std::string& base, std::uint64_t iteration);

/// The checkpoint files of `dir` named `{base}_{iteration}.pt` as (iteration, file name), largest
/// iteration first; none when `dir` does not exist.
/// @throws std::runtime_error when `dir` exists but cannot be listed.
std::vector<std::pair<std::uint64_t, std::string>> list_checkpoints(const std::filesystem::path& dir,
                                                                    const std::string& base);

/// ignite's DiskSaver setup: creates `dir` (with `create_dir`), checks it exists, and with
/// `require_empty` that it holds no `.pt` file; then removes the temporary files of earlier saves
/// of `base`. Returns the error message ("" when none) in ignite's words where ignite has some.
std::string prepare_directory(const std::filesystem::path& dir, bool create_dir, bool require_empty,
                              const std::string& base);

}  // namespace idist::checkpoint
