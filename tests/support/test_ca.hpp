// A throwaway certificate authority made at test time with the openssl command, and the server
// certificates it signs (valid, expired, for another name), for the https tests. Everything is
// in a private folder that goes with the object.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/http_front.hpp"
#include "support/own_services.hpp"
#include "support/process.hpp"

namespace trackd::test {

class TestCa {
  public:
    struct ServerCert {
        std::string cert;  // PEM
        std::string key;   // PEM, unencrypted
    };

    explicit TestCa(const std::string& tag) : dir_(temp_dir(tag + "-ca")) {
        openssl("req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj " +
                shell_quote("/CN=trackd test CA " + tag) + " -keyout " + path("ca.key") + " -out " +
                path("ca.pem"));
    }
    ~TestCa() { run_command("rm -rf " + shell_quote(dir_)); }
    TestCa(const TestCa&) = delete;
    TestCa& operator=(const TestCa&) = delete;

    [[nodiscard]] std::string ca_file() const { return dir_ + "/ca.pem"; }

    // A certificate for `san` (e.g. "DNS:localhost,IP:127.0.0.1"), valid for `days` from now;
    // days = -1 gives one that expired yesterday.
    ServerCert issue(const std::string& name, const std::string& san, int days = 1) const {
        const ServerCert c{dir_ + "/" + name + ".pem", dir_ + "/" + name + ".key"};
        const auto ext = path(name + ".ext");
        run_command("printf 'subjectAltName=%s\\n' " + shell_quote(san) + " > " + ext);
        openssl("req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj " +
                shell_quote("/CN=" + name) + " -keyout " + shell_quote(c.key) + " -out " +
                path(name + ".csr"));
        openssl("x509 -req -in " + path(name + ".csr") + " -CA " + path("ca.pem") + " -CAkey " +
                path("ca.key") + " -CAcreateserial -days " + std::to_string(days) + " -extfile " +
                ext + " -out " + shell_quote(c.cert));
        return c;
    }

  private:
    [[nodiscard]] std::string path(const std::string& file) const {
        return shell_quote(dir_ + "/" + file);
    }
    static void openssl(const std::string& args) {
        const auto r = run_command("openssl " + args);
        if (r.exit_code != 0) throw std::runtime_error("openssl " + args + ":\n" + r.output);
    }

    std::string dir_;
};

// https fronts (rest_proxy.py --tls-cert) before `upstream`, one a client must accept with the
// CA file and the certificates it must refuse, for the tests of each https client.
struct TlsFronts {
    TestCa ca;
    TestCa other;                          // a CA that signed none of them
    std::unique_ptr<HttpFront> good;       // localhost and 127.0.0.1, signed by `ca`
    std::unique_ptr<HttpFront> expired;    // the same names, expired yesterday
    std::unique_ptr<HttpFront> elsewhere;  // for another host name

    TlsFronts(const std::string& tag, const std::string& upstream)
        : ca(tag), other(tag + "-other") {
        const auto front = [&](const std::string& name, const TestCa::ServerCert& c) {
            return std::make_unique<HttpFront>(
                tag + "-" + name, upstream,
                std::vector<std::string>{"--tls-cert", c.cert, "--tls-key", c.key});
        };
        good = front("good", ca.issue("good", "DNS:localhost,IP:127.0.0.1"));
        expired = front("expired", ca.issue("expired", "DNS:localhost,IP:127.0.0.1", -1));
        elsewhere = front("elsewhere", ca.issue("elsewhere", "DNS:elsewhere.example"));
    }

    // Calls refused(front, ca_file, reason) for each certificate a client whose CA file is the
    // setting `ca_setting` must refuse, with the reason its error must give: `good` against the
    // system's store and against another CA, `expired` and `elsewhere` against `ca`.
    template <class Refused>
    void each_refusal(const std::string& ca_setting, Refused&& refused) const {
        refused(*good, std::string(),
                "unable to get local issuer certificate (trusted: the system's CA certificates; "
                "set " +
                    ca_setting + " for a private CA)");
        refused(*good, other.ca_file(),
                "unable to get local issuer certificate (trusted: " + ca_setting + " = '" +
                    other.ca_file() + "')");
        refused(*expired, ca.ca_file(), std::string("certificate has expired"));
        refused(*elsewhere, ca.ca_file(), std::string("hostname mismatch"));
    }
};

}  // namespace trackd::test
