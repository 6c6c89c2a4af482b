#pragma once
// The state of the per-query lookup for a context created outside idist (ignite's _need_to_sync),
// read by tests of sync(temporary).
namespace idist::core {

/// True while a query made on the serial model first looks for a context to adopt: at start, after
/// finalize(), and after sync(true); false after initialize() and after a sync(false) that adopted.
bool need_to_sync();

}  // namespace idist::core
