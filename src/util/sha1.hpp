#pragma once

#include <string>
#include <string_view>

namespace redsem {

// The SHA-1 digest of `data` as 40 lowercase hex digits: the name Redis gives a script
// (EVALSHA, SCRIPT LOAD). Not for security: only to name script texts built at run time.
std::string sha1_hex(std::string_view data);

} // namespace redsem
