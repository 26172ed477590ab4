#include "cli/ping.hpp"

#include "util/errors.hpp"
#include "util/name.hpp"
#include "util/number.hpp"

// Only the declarations: libcurl is loaded at run time (see ping.hpp). Without its macros that
// check setopt's argument types, which would stand in the way of calls through a pointer.
#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <dlfcn.h>
#include <fmt/format.h>
#include <optional>
#include <utility>

namespace redsem::cli {

namespace {

// clang-format off (one per line, as it stays)
#define REDSEM_CURL_FUNCTIONS(X)                                                                   \
    X(curl_global_init)                                                                            \
    X(curl_easy_init)                                                                              \
    X(curl_easy_setopt)                                                                            \
    X(curl_easy_perform)                                                                           \
    X(curl_easy_getinfo)                                                                           \
    X(curl_easy_cleanup)                                                                           \
    X(curl_easy_strerror)                                                                          \
    X(curl_slist_append)                                                                           \
    X(curl_slist_free_all)
// clang-format on

struct Curl {
#define REDSEM_DECLARE(name) decltype(&::name) name = nullptr;
    REDSEM_CURL_FUNCTIONS(REDSEM_DECLARE)
#undef REDSEM_DECLARE
};

constexpr const char* k_libcurl = "libcurl.so.4";

// libcurl's functions, loaded (and initialised) by the first call, from the thread that makes
// the Pinger, before any ping runs beside it; nullopt, with why in `error`, when it cannot be.
const Curl* curl(std::string& error) {
    static const std::pair<std::optional<Curl>, std::string> loaded =
        []() -> std::pair<std::optional<Curl>, std::string> {
#ifdef REDSEM_STATIC
        return {std::nullopt, "a static build of redsem cannot load libcurl"};
#else
        void* library = ::dlopen(k_libcurl, RTLD_NOW | RTLD_LOCAL);
        if (library == nullptr) {
            return {std::nullopt, fmt::format("it needs {} ({}; Debian: apt-get install libcurl4)",
                                              k_libcurl, ::dlerror())};
        }
        Curl functions;
#define REDSEM_LOAD(name)                                                                          \
    functions.name = reinterpret_cast<decltype(&::name)>(::dlsym(library, #name));                 \
    if (functions.name == nullptr) {                                                               \
        return {std::nullopt, fmt::format("{} has no {}", k_libcurl, #name)};                      \
    }
        REDSEM_CURL_FUNCTIONS(REDSEM_LOAD)
#undef REDSEM_LOAD
        if (functions.curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
            return {std::nullopt, "libcurl could not be initialised"};
        }
        return {functions, ""};
#endif
    }();
    error = loaded.second;
    return loaded.first ? &*loaded.first : nullptr;
}

// "https://hc-ping.com" of "https://hc-ping.com/UUID": what a message may show of a ping URL,
// whose path is often the check's secret.
std::string shown_url(const std::string& url) {
    const std::size_t host = url.find("://") + 3;
    const std::size_t end = url.find_first_of("/?#", host);
    std::string shown = url.substr(0, end);
    if (const std::size_t at = shown.rfind('@'); at != std::string::npos && at >= host) {
        shown.erase(host, at + 1 - host); // user:password@
    }
    return printable(shown);
}

std::size_t discard(char*, std::size_t size, std::size_t count, void*) {
    return size * count;
}

// POSTs `body` to `url` within `timeout`; why it failed, or nullopt.
std::optional<std::string> post(const Curl& lib, const std::string& url, const std::string& body,
                                Milliseconds timeout) {
    CURL* handle = lib.curl_easy_init();
    if (handle == nullptr) {
        return "libcurl could not make a request";
    }
    char error[CURL_ERROR_SIZE] = "";
    curl_slist* headers = lib.curl_slist_append(nullptr, "Content-Type: text/plain; charset=utf-8");
    const long ms = static_cast<long>(timeout.count());
    lib.curl_easy_setopt(handle, CURLOPT_URL, url.c_str());
    lib.curl_easy_setopt(handle, CURLOPT_PROTOCOLS_STR, "http,https");
    lib.curl_easy_setopt(handle, CURLOPT_POSTFIELDS, body.c_str());
    lib.curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
    lib.curl_easy_setopt(handle, CURLOPT_HTTPHEADER, headers);
    lib.curl_easy_setopt(handle, CURLOPT_USERAGENT, "redsem/" REDSEM_VERSION);
    lib.curl_easy_setopt(handle, CURLOPT_TIMEOUT_MS, ms);
    lib.curl_easy_setopt(handle, CURLOPT_CONNECTTIMEOUT_MS, ms);
    lib.curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L); // (a ping runs beside other threads)
    lib.curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, error);
    lib.curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, &discard);
    const CURLcode code = lib.curl_easy_perform(handle);
    long status = 0;
    lib.curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &status);
    lib.curl_easy_cleanup(handle);
    lib.curl_slist_free_all(headers);
    if (code != CURLE_OK) {
        return *error != '\0' ? std::string(error) : std::string(lib.curl_easy_strerror(code));
    }
    if (status >= 300) {
        return fmt::format("it answered HTTP {}{}", status,
                           status < 400 ? " (redirects are not followed)" : "");
    }
    return std::nullopt;
}

// Sends one ping, telling on stderr when it fails.
void ping(const std::string& url, const std::string& suffix, const std::string& body,
          Milliseconds timeout) {
    std::string why;
    const Curl* lib = curl(why);
    const std::optional<std::string> failed =
        lib == nullptr ? std::optional(why) : post(*lib, url + suffix, body, timeout);
    if (failed) {
        const std::string which = suffix.empty() ? "" : " (" + suffix + ")";
        std::fprintf(stderr, "redsem: warning: --ping to %s%s failed: %s\n", shown_url(url).c_str(),
                     which.c_str(), printable(*failed, 200).c_str());
    }
}

} // namespace

std::string parse_ping_url(const std::string& text, const char* option) {
    std::string url = text;
    while (url.ends_with('/')) {
        url.pop_back();
    }
    const std::size_t scheme_end = url.find("://");
    std::string scheme = url.substr(0, scheme_end == std::string::npos ? 0 : scheme_end);
    std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    const std::size_t host_start = scheme_end == std::string::npos ? 0 : scheme_end + 3;
    const std::string authority = url.substr(host_start, url.find('/', host_start) - host_start);
    // [user:password@]host[:port], host an [IPv6] literal or a name
    const std::string host_port = authority.substr(authority.rfind('@') + 1);
    const std::size_t colon = host_port.rfind(':');
    const bool has_port =
        colon != std::string::npos && host_port.find(']', colon) == std::string::npos;
    const std::string host = has_port ? host_port.substr(0, colon) : host_port;
    const bool port_ok = !has_port || parse_integer(host_port.substr(colon + 1), 1, 65535);
    const char* wrong = nullptr;
    if (scheme != "http" && scheme != "https") {
        wrong = "is not an http:// or https:// URL";
    } else if (host.empty() || !port_ok) {
        wrong = "has no host, or a port that is not from 1 to 65535";
    } else if (url.find_first_of("?#") != std::string::npos) {
        wrong = "has a query or a fragment: redsem adds /start and /STATUS to its path";
    } else if (url.find_first_of(" \t\r\n") != std::string::npos) {
        wrong = "has a space or a line break";
    }
    if (wrong != nullptr) {
        // Its scheme and host at most: the path of a ping URL is often the check's secret.
        const std::string shown = scheme_end == std::string::npos ? std::string("the URL")
                                                                  : "'" + shown_url(url) + "...'";
        throw UsageError(fmt::format("{}: {} {}", option, shown, wrong));
    }
    return scheme + url.substr(scheme_end);
}

Milliseconds parse_ping_timeout(const std::string& text, const char* option) {
    const Milliseconds timeout = parse_duration(text, option);
    if (timeout.count() <= 0 || timeout > k_max_ping_timeout) {
        throw UsageError(fmt::format("{}: '{}' is not a duration above 0 and at most {}", option,
                                     printable(text), format_duration(k_max_ping_timeout)));
    }
    return timeout;
}

Pinger::Pinger(std::string url, Milliseconds timeout) : m_url(std::move(url)), m_timeout(timeout) {
    std::string why;
    curl(why); // loaded here, before any ping runs in a thread of its own
}

Pinger::~Pinger() {
    if (m_start.joinable()) {
        m_start.join();
    }
}

void Pinger::start() {
    if (!m_start.joinable() && !m_finished) {
        m_start =
            std::thread([url = m_url, timeout = m_timeout] { ping(url, "/start", "", timeout); });
    }
}

void Pinger::finish(int status, const std::string& body) {
    if (m_finished) {
        return;
    }
    m_finished = true;
    if (m_start.joinable()) {
        m_start.join();
    }
    ping(m_url, status == 0 ? "" : "/" + std::to_string(status), body, m_timeout);
}

} // namespace redsem::cli
