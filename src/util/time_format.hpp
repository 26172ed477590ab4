#pragma once

#include <string>

namespace redsem {

// "2026-11-21T07:16:00.123Z" for epoch milliseconds.
std::string iso8601_utc(long long epoch_ms);

} // namespace redsem
