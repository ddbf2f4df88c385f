// Whole-file reads of the small JSON files of a checkpoint (config, index), with a size cap so a
// wrong path to a multi-GB file is an error instead of an allocation.
#pragma once

#include <cstddef>
#include <string>

namespace pagoda {

// Throws pagoda::Error naming `path` when it is missing, a directory, unreadable or over
// `max_bytes`.
std::string read_text_file(const std::string& path, size_t max_bytes);

}  // namespace pagoda
