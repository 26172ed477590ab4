#include "redis/tls_transport.hpp"

#include "redis/openssl_loader.hpp"
#include "util/duration.hpp"
#include "util/errors.hpp"
#include "util/name.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <memory>
#include <mutex>
#include <poll.h>
#include <string_view>
#include <vector>

namespace redsem::net {

namespace {

using SslCtxPtr = std::shared_ptr<SSL_CTX>;
using SslPtr = std::unique_ptr<SSL, void (*)(SSL*)>;

// The reason of the oldest error in OpenSSL's queue (empty when there is none); clears it.
std::string openssl_error() {
    const OpenSsl& ssl = openssl();
    const unsigned long code = ssl.ERR_get_error();
    ssl.ERR_clear_error();
    if (code == 0) {
        return {};
    }
    if (ERR_SYSTEM_ERROR(code)) {
        return std::strerror(ERR_GET_REASON(code)); // a file that cannot be read, say
    }
    const char* reason = ssl.ERR_reason_error_string(code);
    return reason != nullptr ? reason : fmt::format("OpenSSL error {:#x}", code);
}

bool is_ip_address(const std::string& host) {
    in6_addr address{};
    return ::inet_pton(AF_INET, host.c_str(), &address) == 1 ||
           ::inet_pton(AF_INET6, host.c_str(), &address) == 1;
}

// An alert by which the server refused who we are (our certificate, or none).
bool refuses_our_identity(const std::string& reason) {
    static constexpr std::string_view k_alerts[] = {
        "certificate required",      "alert handshake failure",       "alert unknown ca",
        "alert bad certificate",     "alert certificate expired",     "alert certificate unknown",
        "alert certificate revoked", "alert unsupported certificate", "alert access denied"};
    return std::any_of(std::begin(k_alerts), std::end(k_alerts), [&](std::string_view alert) {
        return reason.find(alert) != std::string::npos;
    });
}

[[noreturn]] void refused_identity(const std::string& where, const std::string& reason,
                                   bool have_cert) {
    if (!have_cert) {
        throw DeniedError(fmt::format("Redis at {} requires a client certificate ({}); give one "
                                      "with --cert and --key",
                                      where, reason));
    }
    throw DeniedError(
        fmt::format("Redis at {} refused our client certificate (--cert): {}", where, reason));
}

SslCtxPtr make_context(const TlsOptions& tls) {
    const OpenSsl& ssl = openssl();
    SslCtxPtr context(ssl.SSL_CTX_new(ssl.TLS_client_method()), ssl.SSL_CTX_free);
    if (!context.get()) {
        throw InternalError("cannot set up TLS: " + openssl_error());
    }
    ssl.SSL_CTX_ctrl(context.get(), SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_2_VERSION, nullptr);
    // Redis closes TLS connections without close_notify (CLIENT KILL, shutdown): an end of
    // stream, not an attack on a protocol whose messages carry their own lengths.
    ssl.SSL_CTX_set_options(context.get(), SSL_OP_IGNORE_UNEXPECTED_EOF);
    if (!tls.insecure) {
        ssl.SSL_CTX_set_verify(context.get(), SSL_VERIFY_PEER, nullptr);
        if (tls.ca_dir && !std::filesystem::is_directory(*tls.ca_dir)) {
            throw UsageError(
                fmt::format("--cacertdir '{}' is not a directory", printable(*tls.ca_dir)));
        }
        if (tls.ca_file && std::filesystem::is_directory(*tls.ca_file)) {
            throw UsageError(fmt::format("--cacert '{}' is a directory (use --cacertdir)",
                                         printable(*tls.ca_file)));
        }
        if (tls.ca_file || tls.ca_dir) {
            if (ssl.SSL_CTX_load_verify_locations(
                    context.get(), tls.ca_file ? tls.ca_file->c_str() : nullptr,
                    tls.ca_dir ? tls.ca_dir->c_str() : nullptr) != 1) {
                const std::string reason = openssl_error();
                throw UsageError(fmt::format("cannot use {} '{}' as trusted CAs: {}",
                                             tls.ca_file ? "--cacert" : "--cacertdir",
                                             printable(tls.ca_file ? *tls.ca_file : *tls.ca_dir),
                                             reason));
            }
        } else if (ssl.SSL_CTX_set_default_verify_paths(context.get()) != 1) {
            throw InternalError("cannot load the system's trusted CAs: " + openssl_error());
        }
    }
    if (tls.cert_file) {
        // A key protected by a passphrase fails rather than prompting on the terminal: cron
        // and CI have nobody there to answer.
        ssl.SSL_CTX_set_default_passwd_cb(context.get(), [](char*, int, int, void*) { return 0; });
        if (ssl.SSL_CTX_use_certificate_chain_file(context.get(), tls.cert_file->c_str()) != 1) {
            const std::string reason = openssl_error();
            throw UsageError(
                fmt::format("cannot use --cert '{}': {}", printable(*tls.cert_file), reason));
        }
        if (ssl.SSL_CTX_use_PrivateKey_file(context.get(), tls.key_file->c_str(),
                                            SSL_FILETYPE_PEM) != 1) {
            const std::string reason = openssl_error();
            throw UsageError(fmt::format("cannot use --key '{}': {}{}", printable(*tls.key_file),
                                         reason,
                                         reason.find("decrypt") != std::string::npos ||
                                                 reason.find("pass") != std::string::npos
                                             ? " (a key protected by a passphrase cannot be used)"
                                             : ""));
        }
        if (ssl.SSL_CTX_check_private_key(context.get()) != 1) {
            ssl.ERR_clear_error();
            throw UsageError(fmt::format("--key '{}' is not the key of --cert '{}'",
                                         printable(*tls.key_file), printable(*tls.cert_file)));
        }
    }
    return context;
}

// The context for `tls`, made once per process and shared by every connection that uses the
// same files (a run's heartbeat connects as its main connection did): the CA bundle is parsed
// once, and a reconnect later needs none of the files any more. (SSL_CTX may be shared by the
// connections of several threads.)
SslCtxPtr shared_context(const TlsOptions& tls) {
    static std::mutex mutex;
    static std::map<std::string, SslCtxPtr> contexts;
    auto part = [](const std::optional<std::string>& value) {
        return value ? "+" + *value : std::string("-");
    };
    // The parts that make the context (not --sni, which each connection sets), each kept
    // apart by a NUL, which no path holds.
    std::string key = part(tls.ca_file);
    for (const auto* each : {&tls.ca_dir, &tls.cert_file, &tls.key_file}) {
        key += '\0' + part(*each);
    }
    key += tls.insecure ? "\0insecure" : "\0verify";
    const std::lock_guard lock(mutex);
    SslCtxPtr& context = contexts[key];
    if (!context) {
        context = make_context(tls); // a failure leaves nothing behind: the next one tries again
    }
    return context;
}

class TlsTransport final : public Transport {
public:
    TlsTransport(FileDescriptor fd, const RedisUrl& url, const TlsOptions& tls, SslCtxPtr context)
        : m_openssl(openssl()), m_fd(std::move(fd)), m_where(url.describe()),
          m_context(std::move(context)),
          m_ssl(m_openssl.SSL_new(m_context.get()), m_openssl.SSL_free),
          m_have_cert(tls.cert_file.has_value()), m_trusted(trusted_cas(tls)) {
        if (!m_ssl || m_openssl.SSL_set_fd(m_ssl.get(), m_fd.get()) != 1) {
            throw InternalError("cannot set up TLS: " + openssl_error());
        }
        const std::string& name = tls.sni ? *tls.sni : url.host;
        const bool by_address = is_ip_address(name);
        if (!by_address) {
            // SSL_set_tlsext_host_name(), without the macro's C cast.
            m_openssl.SSL_ctrl(m_ssl.get(), SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                               const_cast<char*>(name.c_str()));
        }
        if (!tls.insecure) {
            X509_VERIFY_PARAM* param = m_openssl.SSL_get0_param(m_ssl.get());
            // Only the subjectAltName names a server (RFC 6125, as browsers and Go check): a
            // certificate without one is not taken on its subject's CN.
            m_openssl.X509_VERIFY_PARAM_set_hostflags(
                param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS | X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
            const int set = by_address
                                ? m_openssl.X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str())
                                : m_openssl.X509_VERIFY_PARAM_set1_host(param, name.c_str(), 0);
            if (set != 1) {
                throw UsageError(
                    fmt::format("cannot verify the name '{}' in a certificate", printable(name)));
            }
        }
    }

    void handshake(Clock::time_point deadline, Milliseconds connect_timeout) {
        m_openssl.ERR_clear_error();
        for (;;) {
            const int result = m_openssl.SSL_connect(m_ssl.get());
            if (result == 1) {
                return;
            }
            const int error = m_openssl.SSL_get_error(m_ssl.get(), result);
            const short events = error == SSL_ERROR_WANT_READ    ? POLLIN
                                 : error == SSL_ERROR_WANT_WRITE ? POLLOUT
                                                                 : 0;
            if (events == 0) {
                fail_handshake(error);
            }
            if (wait_for(m_fd.get(), events, deadline) != Ready::ready) {
                throw UnavailableError(fmt::format(
                    "no TLS handshake with Redis at {} within {} (--connect-timeout); is it a "
                    "TLS port? (a plain port never answers one: use redis:// for it)",
                    m_where, format_duration(connect_timeout)));
            }
        }
    }

    void write_all(std::string_view data, Clock::time_point deadline) override {
        m_openssl.ERR_clear_error();
        while (!data.empty()) {
            const int chunk = static_cast<int>(std::min<std::size_t>(data.size(), 1 << 30));
            const int sent = m_openssl.SSL_write(m_ssl.get(), data.data(), chunk);
            if (sent > 0) {
                data.remove_prefix(static_cast<std::size_t>(sent));
                continue;
            }
            short events = 0;
            try {
                events = io_events(sent, "while sending");
            } catch (const ConnectionLost&) {
                explain_refusal();
                throw;
            }
            if (events == 0) {
                explain_refusal();
                throw ConnectionLost(
                    fmt::format("Redis at {} closed the connection while sending", m_where));
            }
            if (wait_for(m_fd.get(), events, deadline) != Ready::ready) {
                throw ConnectionLost(
                    fmt::format("Redis at {} did not take the request in time", m_where));
            }
        }
    }

    ReadResult read_some(char* buffer, std::size_t size, Clock::time_point deadline,
                         int interrupt_fd) override {
        m_openssl.ERR_clear_error();
        short events = POLLIN;
        for (;;) {
            // Decrypted bytes that an earlier SSL_read left over are not in the socket any
            // more: poll() would not see them. (Not SSL_has_pending(): it also counts part of
            // a record, which needs more bytes from the socket, so skipping poll() on it would
            // spin past the deadline when a record arrives only in part.)
            if (m_openssl.SSL_pending(m_ssl.get()) <= 0) {
                if (auto early = wait_to_read(m_fd.get(), events, deadline, interrupt_fd)) {
                    return *early;
                }
            }
            const int got = m_openssl.SSL_read(
                m_ssl.get(), buffer, static_cast<int>(std::min<std::size_t>(size, 1 << 30)));
            if (got > 0) {
                return {ReadResult::Status::data, static_cast<std::size_t>(got)};
            }
            events = io_events(got, "while reading a reply");
            if (events == 0) {
                return {ReadResult::Status::closed};
            }
        }
    }

private:
    // What to wait for after an m_openssl.SSL_read or m_openssl.SSL_write returned `result`: POLLIN
    // or POLLOUT, or 0 when the server closed the connection. Throws for a broken stream or a TLS
    // error.
    short io_events(int result, std::string_view during) {
        const int error = m_openssl.SSL_get_error(m_ssl.get(), result);
        switch (error) {
        case SSL_ERROR_WANT_READ:
            return POLLIN;
        case SSL_ERROR_WANT_WRITE:
            return POLLOUT;
        case SSL_ERROR_ZERO_RETURN:
            return 0;
        case SSL_ERROR_SYSCALL:
            if (errno == EINTR || errno == EAGAIN) {
                return POLLIN;
            }
            if (errno == 0) {
                return 0;
            }
            lost(m_where, during, errno);
        default: {
            const std::string reason = openssl_error();
            if (refuses_our_identity(reason)) {
                refused_identity(m_where, reason, m_have_cert);
            }
            throw ConnectionLost(fmt::format("TLS connection to Redis at {} failed {}: {}", m_where,
                                             during, reason));
        }
        }
    }

    // A TLS 1.3 server checks our certificate after the handshake has ended on our side: it
    // may refuse it (an alert, then it closes) while we send the first request, which then
    // fails with a broken pipe. The alert is still in the socket: read it, and throw
    // DeniedError if it says so.
    void explain_refusal() {
        char scratch[512];
        m_openssl.ERR_clear_error();
        const int got = m_openssl.SSL_read(m_ssl.get(), scratch, sizeof(scratch));
        if (got <= 0 && m_openssl.SSL_get_error(m_ssl.get(), got) == SSL_ERROR_SSL) {
            const std::string reason = openssl_error();
            if (refuses_our_identity(reason)) {
                refused_identity(m_where, reason, m_have_cert);
            }
        }
        m_openssl.ERR_clear_error();
    }

    [[noreturn]] void fail_handshake(int error) {
        const long verified = m_openssl.SSL_get_verify_result(m_ssl.get());
        const std::string reason = openssl_error();
        if (verified == X509_V_ERR_HOSTNAME_MISMATCH ||
            verified == X509_V_ERR_IP_ADDRESS_MISMATCH) {
            const std::string names = certificate_names();
            const std::string hint =
                names.empty()
                    ? "it names no server in a subjectAltName, and the subject's CN is "
                      "not taken for one"
                    : fmt::format("it is for {}; --sni NAME checks one of them instead", names);
            throw UnavailableError(
                fmt::format("the TLS certificate of Redis at {} failed verification: {} ({})",
                            m_where, m_openssl.X509_verify_cert_error_string(verified), hint));
        }
        if (verified != X509_V_OK) {
            throw UnavailableError(
                fmt::format("the TLS certificate of Redis at {} failed verification: {}{}", m_where,
                            m_openssl.X509_verify_cert_error_string(verified),
                            verify_hint(verified, m_trusted)));
        }
        if (refuses_our_identity(reason)) {
            refused_identity(m_where, reason, m_have_cert);
        }
        if (error == SSL_ERROR_SYSCALL || error == SSL_ERROR_ZERO_RETURN ||
            reason.find("unexpected eof") != std::string::npos) {
            throw UnavailableError(
                fmt::format("Redis at {} closed the connection during the TLS handshake{}", m_where,
                            errno != 0 && error == SSL_ERROR_SYSCALL
                                ? fmt::format(" ({})", std::strerror(errno))
                                : std::string()));
        }
        if (reason.find("wrong version number") != std::string::npos ||
            reason.find("packet length too long") != std::string::npos ||
            reason.find("record layer failure") != std::string::npos) {
            throw UnavailableError(fmt::format(
                "Redis at {} does not speak TLS on that port (a plain port? use redis://)",
                m_where));
        }
        throw UnavailableError(
            fmt::format("TLS handshake with Redis at {} failed: {}", m_where, reason));
    }

    // The names the server's certificate is for, as "a, b": its DNS and IP subject
    // alternative names (never its common name, which names no server); at most 8, printable.
    // (After a failed verification only the chain the server sent is kept, its own certificate
    // first.)
    std::string certificate_names() const {
        const auto* chain =
            reinterpret_cast<const OPENSSL_STACK*>(m_openssl.SSL_get_peer_cert_chain(m_ssl.get()));
        if (chain == nullptr || m_openssl.OPENSSL_sk_num(chain) < 1) {
            return {};
        }
        auto* leaf = static_cast<X509*>(m_openssl.OPENSSL_sk_value(chain, 0));
        std::vector<std::string> names;
        auto* alternatives = static_cast<GENERAL_NAMES*>(
            m_openssl.X509_get_ext_d2i(leaf, NID_subject_alt_name, nullptr, nullptr));
        if (alternatives != nullptr) {
            const auto* stack = reinterpret_cast<const OPENSSL_STACK*>(alternatives);
            for (int i = 0; i < m_openssl.OPENSSL_sk_num(stack); ++i) {
                const auto* name =
                    static_cast<const GENERAL_NAME*>(m_openssl.OPENSSL_sk_value(stack, i));
                if (name->type == GEN_DNS) {
                    const auto* text = m_openssl.ASN1_STRING_get0_data(name->d.dNSName);
                    names.push_back(printable(std::string_view(
                        reinterpret_cast<const char*>(text),
                        static_cast<std::size_t>(m_openssl.ASN1_STRING_length(name->d.dNSName)))));
                } else if (name->type == GEN_IPADD) {
                    const int length = m_openssl.ASN1_STRING_length(name->d.iPAddress);
                    const unsigned char* bytes = m_openssl.ASN1_STRING_get0_data(name->d.iPAddress);
                    char text[INET6_ADDRSTRLEN] = {};
                    if ((length == 4 || length == 16) &&
                        ::inet_ntop(length == 4 ? AF_INET : AF_INET6, bytes, text, sizeof(text))) {
                        names.emplace_back(text);
                    }
                }
            }
            m_openssl.GENERAL_NAMES_free(alternatives);
        }
        if (names.size() > 8) {
            names.resize(8);
            names.emplace_back("...");
        }
        std::string joined;
        for (const std::string& name : names) {
            joined += (joined.empty() ? "" : ", ") + name;
        }
        return joined;
    }

    // Where the trusted CAs came from, for messages: "--cacert 'FILE'", "--cacertdir 'DIR'",
    // or empty for the system's.
    static std::string trusted_cas(const TlsOptions& tls) {
        if (tls.ca_file) {
            return fmt::format("--cacert '{}'", printable(*tls.ca_file));
        }
        if (tls.ca_dir) {
            return fmt::format("--cacertdir '{}'", printable(*tls.ca_dir));
        }
        return {};
    }

    static std::string verify_hint(long verified, const std::string& trusted) {
        switch (verified) {
        case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
        case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
        case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
        case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
        case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
            if (!trusted.empty()) {
                return fmt::format(" (no CA in {} signed it: is it the server's CA?)", trusted);
            }
            return " (an unknown CA: give the server's CA with --cacert)";
        default:
            return "";
        }
    }

    const OpenSsl& m_openssl;
    FileDescriptor m_fd;
    std::string m_where;
    SslCtxPtr m_context;
    SslPtr m_ssl;
    bool m_have_cert;
    std::string m_trusted; // see trusted_cas()
};

} // namespace

std::unique_ptr<Transport> open_tls(const RedisUrl& url, const TlsOptions& tls,
                                    Clock::time_point deadline, Milliseconds connect_timeout) {
    SslCtxPtr context = shared_context(tls); // a bad file is reported before connecting
    auto transport = std::make_unique<TlsTransport>(open_socket(url, deadline, connect_timeout),
                                                    url, tls, std::move(context));
    transport->handshake(deadline, connect_timeout);
    return transport;
}

} // namespace redsem::net
