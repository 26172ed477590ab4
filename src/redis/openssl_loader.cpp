#include "redis/openssl_loader.hpp"

#include "redis/transport.hpp"
#include "util/errors.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <string>

namespace redsem {

namespace net {

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

} // namespace net

std::string openssl_version() {
    return OPENSSL_VERSION_TEXT; // the headers built with; loaded only for rediss://
}

} // namespace redsem
