#include "support/tls_files.hpp"

#include "support/prerequisites.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace redsem::test {

namespace {

constexpr const char* k_new_key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
constexpr const char* k_server_names =
    "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n";

} // namespace

TlsFiles::TlsFiles() {
    std::string pattern = (std::filesystem::temp_directory_path() / "redsem-tls-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
        throw std::runtime_error("mkdtemp failed");
    }
    m_dir = pattern;
    for (const char* ca : {"ca", "other-ca"}) {
        run(std::string("openssl req -x509 ") + k_new_key + " -keyout " + ca + ".key -out " + ca +
            ".crt -days 2 -subj /CN=redsem-test-" + ca);
    }
    leaf("server", "ca", k_server_names);
    // libfaketime itself rather than the `faketime` wrapper, whose named semaphore collides
    // with one left behind by a SIGKILLed process of the same pid ("sem_open: File exists").
    if (const auto faketime = find_libfaketime()) {
        leaf("expired", "ca", k_server_names,
             "LD_PRELOAD='" + *faketime + "' FAKETIME='@2020-01-01 00:00:00' ");
        m_have_expired = true;
    }
    leaf("wrong-name", "ca", "subjectAltName=DNS:other.example\nextendedKeyUsage=serverAuth\n");
    leaf("other-server", "other-ca", k_server_names);
    leaf("client", "ca", "extendedKeyUsage=clientAuth\n");
    leaf("cn-only", "ca", "extendedKeyUsage=serverAuth\n", "", "localhost");
}

TlsFiles::~TlsFiles() {
    std::error_code ignored;
    std::filesystem::remove_all(m_dir, ignored);
}

void TlsFiles::run(const std::string& command) const {
    const std::string line = "cd '" + m_dir + "' && " + command + " >openssl.log 2>&1";
    if (std::system(line.c_str()) != 0) {
        throw std::runtime_error("failed: " + command + " (see " + m_dir + "/openssl.log)");
    }
}

void TlsFiles::leaf(const std::string& name, const std::string& ca, const std::string& extensions,
                    const std::string& before, const std::string& common_name) const {
    std::ofstream(path(name + ".ext")) << extensions;
    run(std::string("openssl req ") + k_new_key + " -keyout " + name + ".key -out " + name +
        ".csr -subj /CN=" + (common_name.empty() ? name : common_name));
    run(before + "openssl x509 -req -in " + name + ".csr -CA " + ca + ".crt -CAkey " + ca +
        ".key -CAcreateserial -days 1 -out " + name + ".crt -extfile " + name + ".ext");
}

} // namespace redsem::test
