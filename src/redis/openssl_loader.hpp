#pragma once

// The OpenSSL functions redsem calls (src/redis/ only), loaded from the system's libssl when
// a rediss:// URL first needs them, or linked in by a static build (REDSEM_STATIC).

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

namespace redsem::net {

// OpenSSL is loaded when a rediss:// URL first needs it, not linked: its shared libraries
// would cost every start of redsem about 4,000 more relocations (about half a millisecond),
// and most connections are plain. The functions come from the system's libssl, so its
// security updates apply as to any linked program. (A static build, REDSEM_STATIC, cannot
// load a shared library: it links OpenSSL in.)
// clang-format off (it cannot lay out a list of macro calls: one per line, as it stays)
#define REDSEM_OPENSSL_FUNCTIONS(X)                                                                \
    X(SSL_CTX_new)                                                                                 \
    X(TLS_client_method)                                                                           \
    X(SSL_CTX_free)                                                                                \
    X(SSL_CTX_ctrl)                                                                                \
    X(SSL_CTX_set_options)                                                                         \
    X(SSL_CTX_set_verify)                                                                          \
    X(SSL_CTX_load_verify_locations)                                                               \
    X(SSL_CTX_set_default_verify_paths)                                                            \
    X(SSL_CTX_use_certificate_chain_file)                                                          \
    X(SSL_CTX_use_PrivateKey_file)                                                                 \
    X(SSL_CTX_check_private_key)                                                                   \
    X(SSL_CTX_set_default_passwd_cb)                                                               \
    X(SSL_new)                                                                                     \
    X(SSL_free)                                                                                    \
    X(SSL_set_fd)                                                                                  \
    X(SSL_ctrl)                                                                                    \
    X(SSL_get0_param)                                                                              \
    X(X509_VERIFY_PARAM_set_hostflags)                                                             \
    X(X509_VERIFY_PARAM_set1_ip_asc)                                                               \
    X(X509_VERIFY_PARAM_set1_host)                                                                 \
    X(SSL_connect)                                                                                 \
    X(SSL_get_error)                                                                               \
    X(SSL_write)                                                                                   \
    X(SSL_read)                                                                                    \
    X(SSL_pending)                                                                                 \
    X(SSL_get_verify_result)                                                                       \
    X(X509_verify_cert_error_string)                                                               \
    X(ERR_get_error)                                                                               \
    X(ERR_clear_error)                                                                             \
    X(ERR_reason_error_string)                                                                     \
    X(SSL_get_peer_cert_chain)                                                                     \
    X(OPENSSL_sk_num)                                                                              \
    X(OPENSSL_sk_value)                                                                            \
    X(X509_get_ext_d2i)                                                                            \
    X(GENERAL_NAMES_free)                                                                          \
    X(ASN1_STRING_get0_data)                                                                       \
    X(ASN1_STRING_length)
// clang-format on

struct OpenSsl {
#define REDSEM_DECLARE(name) decltype(&::name) name = nullptr;
    REDSEM_OPENSSL_FUNCTIONS(REDSEM_DECLARE)
#undef REDSEM_DECLARE
};

// The functions, loaded on the first call. Throws UnavailableError when the library or one of
// them is missing.
const OpenSsl& openssl();

} // namespace redsem::net
