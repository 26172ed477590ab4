#pragma once

#include <string>
#include <string_view>

namespace redsem::cli {

// The first line of password file `path` (named in messages with `source`: "--password-file",
// "$REDSEM_PASSWORD_FILE", ...). Refused, as ssh refuses a key file, when it is not a regular
// file, is owned by another user than this one or root, may be written by others, or is
// larger than a password file can be (UsageError); warns when others may read it.
std::string read_password_file(const std::string& path, std::string_view source);

// Warns when others may read the TLS client key `path` (OpenSSL reads it later, by its path).
void check_key_file(const std::string& path);

} // namespace redsem::cli
