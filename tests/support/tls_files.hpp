#pragma once

#include <string>

namespace redsem::test {

// Certificates for TLS tests, made at run time with the `openssl` command (EC P-256 keys, so
// it is quick) in a fresh temporary directory that the destructor removes:
//   ca             a CA, which signs everything below but other-ca's server
//   server         for localhost and 127.0.0.1
//   expired        for localhost and 127.0.0.1, valid only for a day in 2020 (signed under
//                  libfaketime; only when it is installed: have_expired())
//   wrong-name     for other.example only
//   other-server   for localhost and 127.0.0.1, signed by another CA (other-ca)
//   client         a client certificate (extendedKeyUsage clientAuth)
//   cn-only        CN=localhost and no subjectAltName
// Each NAME has NAME.crt and NAME.key; path("ca.crt") gives the full path.
class TlsFiles {
public:
    TlsFiles();
    ~TlsFiles();
    TlsFiles(const TlsFiles&) = delete;
    TlsFiles& operator=(const TlsFiles&) = delete;

    std::string path(const std::string& file) const { return m_dir + "/" + file; }
    // Whether "expired" was made (it needs libfaketime).
    bool have_expired() const { return m_have_expired; }

private:
    void run(const std::string& command) const;
    void leaf(const std::string& name, const std::string& ca, const std::string& extensions,
              const std::string& before = "", const std::string& common_name = "") const;

    std::string m_dir;
    bool m_have_expired = false;
};

} // namespace redsem::test
