#include "cli/tls_options.hpp"

#include "cli/secret_files.hpp"
#include "cli/variables.hpp"
#include "util/errors.hpp"

#include <fmt/format.h>
#include <iostream>

namespace redsem::cli {

TlsOptions resolve_tls(const GlobalOptions& options, const RedisUrl& url) {
    TlsOptions tls;
    std::string cert_source;
    std::string key_source;
    std::string ignored;
    tls.ca_file = option_or_env(options.cacert, "REDSEM_CACERT", ignored, "--cacert");
    tls.ca_dir = option_or_env(options.cacertdir, "REDSEM_CACERTDIR", ignored, "--cacertdir");
    tls.cert_file = option_or_env(options.cert, "REDSEM_CERT", cert_source, "--cert");
    tls.key_file = option_or_env(options.key, "REDSEM_KEY", key_source, "--key");
    tls.sni = option_or_env(options.sni, "REDSEM_SNI", ignored, "--sni");
    tls.insecure = options.insecure;
    if (auto insecure = env("REDSEM_INSECURE"); insecure && !options.insecure && url.tls) {
        tls.insecure = parse_switch(*insecure, "$REDSEM_INSECURE");
    }
    // Options on the command line are for this URL; variables may be meant for other ones.
    const bool tls_options_given = options.cacert || options.cacertdir || options.cert ||
                                   options.key || options.sni || options.insecure;
    if (!url.tls) {
        if (tls_options_given) {
            throw UsageError(fmt::format(
                "TLS options need a rediss:// or rediss-sentinel:// URL, not {}", url.describe()));
        }
        return TlsOptions{};
    }
    if (tls.sni && tls.sni->empty()) {
        // An empty name would turn the certificate's name check off.
        throw UsageError("--sni needs a server name");
    }
    if (tls.cert_file && !tls.key_file) {
        throw UsageError(
            fmt::format("{} needs a private key too (--key or $REDSEM_KEY)", cert_source));
    }
    if (tls.key_file && !tls.cert_file) {
        throw UsageError(
            fmt::format("{} needs a certificate too (--cert or $REDSEM_CERT)", key_source));
    }
    if (tls.key_file) {
        check_key_file(*tls.key_file);
    }
    if (tls.insecure) {
        std::cerr << fmt::format("redsem: warning: not verifying the TLS certificate of {} "
                                 "(--insecure): anyone on the way can read and change what is "
                                 "sent, the password included\n",
                                 url.describe());
    }
    return tls;
}

} // namespace redsem::cli
