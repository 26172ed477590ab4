#pragma once

#include <stdexcept>
#include <string>

namespace redsem {

// The exit codes are a published contract (README, man page); tests pin every one of them.
enum class ExitCode : int {
    ok = 0,
    not_held = 1,         // release/renew: the token holds no slot
    warnings = 1,         // doctor: something deserves a look, nothing is unsafe
    usage = 64,           // EX_USAGE: bad option, argument, URL, duration, name or limit
    conflict = 65,        // EX_DATAERR: limit mismatch, or a foreign key in the semaphore's place
    unavailable = 69,     // EX_UNAVAILABLE: Redis unreachable, timed out, or refusing (LOADING...)
    internal = 70,        // EX_SOFTWARE: a bug in redsem or an unexpected reply
    closed = 73,          // admission closed after a possible loss of data, or paused: -E does
                          // not change it
    output = 74,          // EX_IOERR: standard output could not be written
    timeout = 75,         // EX_TEMPFAIL: no slot within --wait
    lost = 76,            // EX_PROTOCOL: run: the slot was lost and the command stopped
    denied = 77,          // EX_NOPERM: wrong password, unknown user, ACL denial
    unsafe = 78,          // EX_CONFIG: doctor: the Redis is set up in a way unsafe for redsem
    superseded = 80,      // --supersede: a newer waiter took this one's place in the queue
    queue_full = 81,      // --max-waiting: as many waited as it allows
    timed_out = 124,      // run --max-run: the command ran too long and was stopped (timeout(1))
    cannot_execute = 126, // run: the command is not an executable file (as a shell says)
    not_found = 127,      // run: the command was not found (as a shell says)
};

// The published table, in order: `redsem --help` prints it, and the man page test checks that
// redsem(1) lists every code.
struct ExitCodeMeaning {
    ExitCode code;
    const char* meaning;
};
inline constexpr ExitCodeMeaning k_exit_codes[] = {
    {ExitCode::ok, "ok"},
    {ExitCode::not_held, "token holds nothing (doctor: warnings, status --overdue: overdue)"},
    {ExitCode::usage, "usage"},
    {ExitCode::conflict, "conflict"},
    {ExitCode::unavailable, "Redis unavailable"},
    {ExitCode::internal, "internal error"},
    {ExitCode::closed, "admission closed (lost data, or paused)"},
    {ExitCode::output, "cannot write output"},
    {ExitCode::timeout, "not acquired in time"},
    {ExitCode::lost, "slot lost (run)"},
    {ExitCode::denied, "auth/permission denied"},
    {ExitCode::unsafe, "doctor: unsafe setup"},
    {ExitCode::superseded, "superseded by a newer waiter (--supersede)"},
    {ExitCode::queue_full, "queue full (--max-waiting)"},
    {ExitCode::timed_out, "command stopped at --max-run (run)"},
    {ExitCode::cannot_execute, "command not executable (run)"},
    {ExitCode::not_found, "command not found (run)"},
};

// Whether the same request may succeed when tried again.
enum class Transience {
    permanent,   // a refusal, a bad request or a bug: the answer will not change
    transient,   // Redis is there but cannot serve now (LOADING, BUSY, TRYAGAIN, CLUSTERDOWN,
                 // MASTERDOWN): try again shortly
    unreachable, // Redis could not be reached: worth retrying only if it was reached before
    broken,      // the connection broke after the request was sent: it may or may not have run
};

// Every failure redsem reports is an Error; the one catch in cli/app.cpp prints
// "redsem: error: <what()>" and exits with exit_code().
class Error : public std::runtime_error {
public:
    Error(ExitCode code, const std::string& message, Transience transience = Transience::permanent)
        : std::runtime_error(message), m_exit_code(static_cast<int>(code)),
          m_transience(transience) {}
    int exit_code() const noexcept { return m_exit_code; }
    Transience transience() const noexcept { return m_transience; }
    // Whether the message was told on stderr already (or kept back by -q) where it happened:
    // the one catch then prints nothing more.
    virtual bool told() const noexcept { return false; }

protected:
    Error(int exit_code, const std::string& message)
        : std::runtime_error(message), m_exit_code(exit_code) {}

private:
    int m_exit_code;
    Transience m_transience = Transience::permanent;
};

class UsageError : public Error {
public:
    explicit UsageError(const std::string& message) : Error(ExitCode::usage, message) {}
};

class ConflictError : public Error {
public:
    explicit ConflictError(const std::string& message) : Error(ExitCode::conflict, message) {}
};

// Redis could not be reached (a refused or timed-out connect).
class UnavailableError : public Error {
public:
    explicit UnavailableError(const std::string& message)
        : Error(ExitCode::unavailable, message, Transience::unreachable) {}

protected:
    UnavailableError(const std::string& message, Transience transience)
        : Error(ExitCode::unavailable, message, transience) {}
};

// The connection broke after a request was sent: the request may or may not have run.
class ConnectionLost : public UnavailableError {
public:
    explicit ConnectionLost(const std::string& message)
        : UnavailableError(message, Transience::broken) {}
};

// The server turned down what the URL asks of it (a database it does not have): its answer,
// not a mistake in the command line, and not worth retrying.
class ServerRefusal : public UnavailableError {
public:
    explicit ServerRefusal(const std::string& message)
        : UnavailableError(message, Transience::permanent) {}
};

// --replicas: fewer replicas than asked for confirmed a write in time.
class NotReplicatedError : public UnavailableError {
public:
    explicit NotReplicatedError(const std::string& message)
        : UnavailableError(message, Transience::permanent) {}
};

class InternalError : public Error {
public:
    explicit InternalError(const std::string& message) : Error(ExitCode::internal, message) {}
};

// No slot came because admission was closed after a possible loss of data, or paused (redsem
// pause): not "busy", so neither -E nor -q hides it.
class ClosedError : public Error {
public:
    explicit ClosedError(const std::string& message) : Error(ExitCode::closed, message) {}
};

class DeniedError : public Error {
public:
    explicit DeniedError(const std::string& message) : Error(ExitCode::denied, message) {}
};

class NotHeldError : public Error {
public:
    explicit NotHeldError(const std::string& message) : Error(ExitCode::not_held, message) {}
};

// A waiter's place in the queue was released by somebody else (`redsem release NAME TOKEN`):
// its acquire or run ends holding nothing.
class PlaceReleased : public NotHeldError {
public:
    using NotHeldError::NotHeldError;
};

// A waiter that asked for --supersede was superseded by a newer one, which took its place in
// the queue; or a caller with --max-waiting found as many waiting as it allows. Either ends
// holding nothing.
// `told`: see Error::told().
class Superseded : public Error {
public:
    explicit Superseded(const std::string& message, bool told = false)
        : Error(ExitCode::superseded, message), m_told(told) {}
    bool told() const noexcept override { return m_told; }

private:
    bool m_told;
};
class QueueFull : public Error {
public:
    explicit QueueFull(const std::string& message, bool told = false)
        : Error(ExitCode::queue_full, message), m_told(told) {}
    bool told() const noexcept override { return m_told; }

private:
    bool m_told;
};

// The command given to `run` cannot be started: 127 when it is not found, 126 when it cannot
// be executed, as a shell says.
class CommandError : public Error {
public:
    CommandError(int exit_code, const std::string& message) : Error(exit_code, message) {}
};

// A blocking wait for Redis was cut short because the caller's interrupt fd became readable
// (see Connection::command()). Callers turn it into Interrupted or another outcome; it reaches
// the user only through a bug (then exit 70).
class WaitInterrupted : public Error {
public:
    WaitInterrupted() : Error(ExitCode::internal, "a wait for Redis was interrupted") {}
};

// A wait was cut short by a signal. Exits 128+N silently, as a shell reports a signal.
class Interrupted : public Error {
public:
    explicit Interrupted(int signal) : Error(128 + signal, ""), m_signal(signal) {}
    int signal() const noexcept { return m_signal; }

private:
    int m_signal;
};

} // namespace redsem
