#pragma once

#include "cli/options.hpp"
#include "redis/url.hpp"

namespace redsem::cli {

// The TLS options of a connection to `url`: each option, else its variable ($REDSEM_CACERT,
// $REDSEM_CACERTDIR, $REDSEM_CERT, $REDSEM_KEY, $REDSEM_SNI, $REDSEM_INSECURE). Throws
// UsageError for TLS options on a URL without TLS, a certificate without its key (or the
// other way), or a bad $REDSEM_INSECURE; warns when the key may be read by others, and on
// --insecure.
TlsOptions resolve_tls(const GlobalOptions& options, const RedisUrl& url);

} // namespace redsem::cli
