#include "redis/transport.hpp"

#include "util/duration.hpp"
#include "util/errors.hpp"
#include "util/name.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <dlfcn.h>
#include <filesystem>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <utility>

namespace redsem {

namespace {

using Clock = Transport::Clock;
using Milliseconds = std::chrono::milliseconds;

class FileDescriptor {
public:
    explicit FileDescriptor(int fd = -1) : m_fd(fd) {}
    ~FileDescriptor() {
        if (m_fd >= 0) {
            ::close(m_fd);
        }
    }
    FileDescriptor(FileDescriptor&& other) noexcept : m_fd(std::exchange(other.m_fd, -1)) {}
    FileDescriptor& operator=(FileDescriptor&& other) noexcept {
        std::swap(m_fd, other.m_fd);
        return *this;
    }
    int get() const noexcept { return m_fd; }

private:
    int m_fd;
};

enum class Ready { ready, timed_out, interrupted };

// Waits until `fd` has one of `events`, or `interrupt_fd` (>= 0) is readable, or `deadline`
// passed. Past the deadline it still looks once: a process resumed after a stop (SIGSTOP, a
// paused VM) finds what came meanwhile rather than calling it lost.
Ready wait_for(int fd, short events, Clock::time_point deadline, int interrupt_fd = -1) {
    for (;;) {
        const auto left =
            std::max(Milliseconds{0}, std::chrono::ceil<Milliseconds>(deadline - Clock::now()));
        pollfd fds[2] = {{fd, events, 0}, {interrupt_fd, POLLIN, 0}};
        const int count = ::poll(fds, interrupt_fd >= 0 ? 2 : 1, static_cast<int>(left.count()));
        if (count < 0 && errno != EINTR) {
            return Ready::timed_out;
        }
        if (interrupt_fd >= 0 && (fds[1].revents & POLLIN) != 0) {
            return Ready::interrupted;
        }
        if (count > 0 && fds[0].revents != 0) {
            return Ready::ready; // POLLERR and POLLHUP too: the next I/O call tells what
        }
        if (left.count() == 0) {
            return Ready::timed_out;
        }
    }
}

// wait_for() on the way to a read: nullopt when the read may go ahead, else what read_some()
// returns instead.
std::optional<ReadResult> wait_to_read(int fd, short events, Clock::time_point deadline,
                                       int interrupt_fd) {
    switch (wait_for(fd, events, deadline, interrupt_fd)) {
    case Ready::timed_out:
        return ReadResult{ReadResult::Status::timed_out};
    case Ready::interrupted:
        return ReadResult{ReadResult::Status::interrupted};
    case Ready::ready:
        break;
    }
    return std::nullopt;
}

[[noreturn]] void lost(const std::string& where, std::string_view during, int error) {
    if (error == EPIPE || error == ECONNRESET) {
        throw ConnectionLost(fmt::format("Redis at {} closed the connection {}", where, during));
    }
    throw ConnectionLost(fmt::format("connection to Redis at {} failed {}: {}", where, during,
                                     std::strerror(error)));
}

// Connects a non-blocking, close-on-exec socket to `address` by `deadline`. Returns the
// socket, or an invalid one with `error` set.
FileDescriptor connect_to(const sockaddr* address, socklen_t length, int family,
                          Clock::time_point deadline, int& error) {
    FileDescriptor fd(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (fd.get() < 0) {
        error = errno;
        return FileDescriptor();
    }
    if (::connect(fd.get(), address, length) != 0) {
        if (errno != EINPROGRESS && errno != EAGAIN) {
            error = errno;
            return FileDescriptor();
        }
        if (wait_for(fd.get(), POLLOUT, deadline) != Ready::ready) {
            error = ETIMEDOUT;
            return FileDescriptor();
        }
        socklen_t size = sizeof(error);
        if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &size) != 0) {
            error = errno;
            return FileDescriptor();
        }
        if (error != 0) {
            return FileDescriptor();
        }
    }
    if (family != AF_UNIX) {
        const int one = 1;
        ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    return fd;
}

FileDescriptor open_socket(const RedisUrl& url, Clock::time_point deadline,
                           const Milliseconds connect_timeout) {
    const std::string where = url.describe();
    int error = 0;
    if (url.kind == RedisUrl::Kind::unix_socket) {
        sockaddr_un address{};
        address.sun_family = AF_UNIX;
        if (url.socket_path.size() >= sizeof(address.sun_path)) {
            throw UsageError(fmt::format("the socket path in {} is longer than {} bytes", where,
                                         sizeof(address.sun_path) - 1));
        }
        std::memcpy(address.sun_path, url.socket_path.c_str(), url.socket_path.size() + 1);
        FileDescriptor fd = connect_to(reinterpret_cast<const sockaddr*>(&address), sizeof(address),
                                       AF_UNIX, deadline, error);
        if (fd.get() >= 0) {
            return fd;
        }
    } else {
        addrinfo hints{};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        addrinfo* found = nullptr;
        const std::string port = std::to_string(url.port);
        const int status = ::getaddrinfo(url.host.c_str(), port.c_str(), &hints, &found);
        if (status != 0) {
            throw UnavailableError(
                fmt::format("cannot connect to Redis at {}: {}", where,
                            status == EAI_SYSTEM ? std::strerror(errno) : ::gai_strerror(status)));
        }
        std::unique_ptr<addrinfo, void (*)(addrinfo*)> addresses(found, ::freeaddrinfo);
        for (const addrinfo* each = found; each != nullptr; each = each->ai_next) {
            FileDescriptor fd =
                connect_to(each->ai_addr, each->ai_addrlen, each->ai_family, deadline, error);
            if (fd.get() >= 0) {
                return fd;
            }
        }
    }
    if (error == ETIMEDOUT) {
        throw UnavailableError(fmt::format("cannot connect to Redis at {}: no answer within {} "
                                           "(--connect-timeout)",
                                           where, format_duration(connect_timeout)));
    }
    throw UnavailableError(
        fmt::format("cannot connect to Redis at {}: {}", where, std::strerror(error)));
}

class PlainTransport final : public Transport {
public:
    PlainTransport(FileDescriptor fd, std::string where)
        : m_fd(std::move(fd)), m_where(std::move(where)) {}

    void write_all(std::string_view data, Clock::time_point deadline) override {
        while (!data.empty()) {
            const ssize_t sent = ::send(m_fd.get(), data.data(), data.size(), MSG_NOSIGNAL);
            if (sent >= 0) {
                data.remove_prefix(static_cast<std::size_t>(sent));
            } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
                if (wait_for(m_fd.get(), POLLOUT, deadline) != Ready::ready) {
                    throw ConnectionLost(
                        fmt::format("Redis at {} did not take the request in time", m_where));
                }
            } else if (errno != EINTR) {
                lost(m_where, "while sending", errno);
            }
        }
    }

    ReadResult read_some(char* buffer, std::size_t size, Clock::time_point deadline,
                         int interrupt_fd) override {
        for (;;) {
            if (auto early = wait_to_read(m_fd.get(), POLLIN, deadline, interrupt_fd)) {
                return *early;
            }
            const ssize_t got = ::recv(m_fd.get(), buffer, size, 0);
            if (got > 0) {
                return {ReadResult::Status::data, static_cast<std::size_t>(got)};
            }
            if (got == 0) {
                return {ReadResult::Status::closed};
            }
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                lost(m_where, "while reading a reply", errno);
            }
        }
    }

private:
    FileDescriptor m_fd;
    std::string m_where;
};

// --- TLS ---------------------------------------------------------------------------------

// OpenSSL is loaded when a rediss:// URL first needs it, not linked: its shared libraries
// would cost every start of redsem about 4,000 more relocations (about half a millisecond),
// and most connections are plain. The functions come from the system's libssl, so its
// security updates apply as to any linked program. (A static build, REDSEM_STATIC, cannot
// load a shared library: it links OpenSSL in.)
#define REDSEM_OPENSSL_FUNCTIONS(X)                                                                \
    X(SSL_CTX_new)                                                                                 \
    X(TLS_client_method)                                                                           \
    X(SSL_CTX_free)                                                                                \
    X(SSL_CTX_ctrl)                                                                                \
    X(SSL_CTX_set_options)                                                                         \
    X(SSL_CTX_set_verify) X(SSL_CTX_load_verify_locations) X(SSL_CTX_set_default_verify_paths)     \
        X(SSL_CTX_use_certificate_chain_file) X(SSL_CTX_use_PrivateKey_file)                       \
            X(SSL_CTX_check_private_key) X(SSL_CTX_set_default_passwd_cb) X(SSL_new) X(SSL_free)   \
                X(SSL_set_fd) X(SSL_ctrl) X(SSL_get0_param) X(X509_VERIFY_PARAM_set_hostflags)     \
                    X(X509_VERIFY_PARAM_set1_ip_asc) X(X509_VERIFY_PARAM_set1_host) X(SSL_connect) \
                        X(SSL_get_error) X(SSL_write) X(SSL_read) X(SSL_pending)                   \
                            X(SSL_get_verify_result) X(X509_verify_cert_error_string)              \
                                X(ERR_get_error) X(ERR_clear_error) X(ERR_reason_error_string)

struct OpenSsl {
#define REDSEM_DECLARE(name) decltype(&::name) name = nullptr;
    REDSEM_OPENSSL_FUNCTIONS(REDSEM_DECLARE)
#undef REDSEM_DECLARE
};

#ifdef REDSEM_OPENSSL_LINKED
// A static build (REDSEM_STATIC) links OpenSSL in.
const OpenSsl& openssl() {
    static const OpenSsl linked = [] {
        OpenSsl functions;
#define REDSEM_LINK(name) functions.name = &::name;
        REDSEM_OPENSSL_FUNCTIONS(REDSEM_LINK)
#undef REDSEM_LINK
        return functions;
    }();
    return linked;
}
#else
#define REDSEM_STRINGIFY(x) #x
#define REDSEM_SONAME(major) "libssl.so." REDSEM_STRINGIFY(major)
#if OPENSSL_VERSION_MAJOR >= 3
constexpr const char* k_libssl = REDSEM_SONAME(OPENSSL_VERSION_MAJOR);
#else
constexpr const char* k_libssl = "libssl.so.1.1";
#endif

// The OpenSSL functions redsem uses, loaded on the first call. Throws UnavailableError when
// the library is missing.
const OpenSsl& openssl() {
    static const OpenSsl loaded = [] {
        void* library = ::dlopen(k_libssl, RTLD_NOW | RTLD_LOCAL);
        if (library == nullptr) {
            throw UnavailableError(
                fmt::format("TLS needs OpenSSL's {} ({})", k_libssl, ::dlerror()));
        }
        OpenSsl functions;
#define REDSEM_LOAD(name)                                                                          \
    functions.name = reinterpret_cast<decltype(&::name)>(::dlsym(library, #name));                 \
    if (functions.name == nullptr) {                                                               \
        throw UnavailableError(fmt::format("{} has no {}", k_libssl, #name));                      \
    }
        REDSEM_OPENSSL_FUNCTIONS(REDSEM_LOAD)
#undef REDSEM_LOAD
        return functions;
    }();
    return loaded;
}
#endif

using SslCtxPtr = std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)>;
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
    if (!context) {
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

class TlsTransport final : public Transport {
public:
    TlsTransport(FileDescriptor fd, const RedisUrl& url, const TlsOptions& tls, SslCtxPtr context)
        : m_openssl(openssl()), m_fd(std::move(fd)), m_where(url.describe()),
          m_context(std::move(context)),
          m_ssl(m_openssl.SSL_new(m_context.get()), m_openssl.SSL_free),
          m_have_cert(tls.cert_file.has_value()) {
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
            m_openssl.X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
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
                    "TLS port?",
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
        if (verified != X509_V_OK) {
            throw UnavailableError(fmt::format(
                "the TLS certificate of Redis at {} failed verification: {}{}", m_where,
                m_openssl.X509_verify_cert_error_string(verified), verify_hint(verified)));
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

    static std::string verify_hint(long verified) {
        switch (verified) {
        case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
        case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
        case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
        case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
        case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
            return " (an unknown CA: give the server's CA with --cacert)";
        case X509_V_ERR_HOSTNAME_MISMATCH:
        case X509_V_ERR_IP_ADDRESS_MISMATCH:
            return " (the certificate is for another name; --sni NAME checks another)";
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
};

} // namespace

std::unique_ptr<Transport> Transport::open(const RedisUrl& url, const TlsOptions& tls,
                                           Milliseconds connect_timeout) {
    const auto deadline = Clock::now() + connect_timeout;
    if (!url.tls) {
        return std::make_unique<PlainTransport>(open_socket(url, deadline, connect_timeout),
                                                url.describe());
    }
    SslCtxPtr context = make_context(tls); // a bad file is reported before connecting
    auto transport = std::make_unique<TlsTransport>(open_socket(url, deadline, connect_timeout),
                                                    url, tls, std::move(context));
    transport->handshake(deadline, connect_timeout);
    return transport;
}

std::string openssl_version() {
    return OPENSSL_VERSION_TEXT; // the headers built with; loaded only for rediss://
}

} // namespace redsem
