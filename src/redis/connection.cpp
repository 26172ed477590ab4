#include "redis/connection.hpp"

#include "redis/sentinel.hpp"
#include "util/duration.hpp"
#include "util/name.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <hiredis/hiredis.h>

namespace redsem {

using Clock = std::chrono::steady_clock;

namespace {

// EVALSHA (by_sha) or EVAL of `call`, with a last argument saying which (see eval()).
std::vector<std::string> script_argv(const ScriptCall& call, bool by_sha) {
    std::vector<std::string> argv;
    argv.reserve(4 + call.keys.size() + call.args.size());
    argv.emplace_back(by_sha ? "EVALSHA" : "EVAL");
    argv.emplace_back(by_sha ? call.script.sha1 : call.script.body);
    argv.push_back(std::to_string(call.keys.size()));
    argv.insert(argv.end(), call.keys.begin(), call.keys.end());
    argv.insert(argv.end(), call.args.begin(), call.args.end());
    argv.emplace_back(by_sha ? "0" : "1");
    return argv;
}

Reply convert(const redisReply& raw) {
    Reply reply;
    switch (raw.type) {
    case REDIS_REPLY_STATUS:
        reply.type = Reply::Type::status;
        reply.text.assign(raw.str, raw.len);
        break;
    case REDIS_REPLY_ERROR:
        reply.type = Reply::Type::error;
        reply.text.assign(raw.str, raw.len);
        break;
    case REDIS_REPLY_STRING:
        reply.type = Reply::Type::string;
        reply.text.assign(raw.str, raw.len);
        break;
    case REDIS_REPLY_INTEGER:
        reply.type = Reply::Type::integer;
        reply.integer = raw.integer;
        break;
    case REDIS_REPLY_ARRAY:
        reply.type = Reply::Type::array;
        reply.elements.reserve(raw.elements);
        for (std::size_t i = 0; i < raw.elements; ++i) {
            reply.elements.push_back(convert(*raw.element[i]));
        }
        break;
    default:
        reply.type = Reply::Type::nil;
        break;
    }
    return reply;
}

// Through sentinels, a server that still is not the master after discovery: the sentinels
// have not caught up with a failover yet.
[[noreturn]] void throw_stale_master(const std::string& error) {
    throw Error(ExitCode::unavailable,
                fmt::format("the server the sentinels name as the master is not one ({}): a "
                            "failover under way?",
                            printable(error, 100)),
                Transience::transient);
}

} // namespace

Connection::Connection(ConnectOptions options)
    : m_options(std::move(options)), m_reader(nullptr, redisReaderFree) {}

Connection::~Connection() = default;
Connection::Connection(Connection&&) noexcept = default;
Connection& Connection::operator=(Connection&&) noexcept = default;

void Connection::disconnect() noexcept {
    m_transport.reset();
    m_reader.reset();
    m_output.clear();
}

void Connection::connect() {
    if (m_transport) {
        if (through_sentinels()) {
            master_moved(k_master_recheck);
        }
        if (m_transport) {
            return;
        }
    }
    if (through_sentinels()) {
        open_master(find_master(m_options.url.sentinels.size(), m_options.connect_timeout));
    } else {
        open(m_options.url);
    }
}

bool Connection::master_moved(Milliseconds fresh) {
    if (!through_sentinels() || !m_transport || Clock::now() - m_checked_at < fresh) {
        return false;
    }
    // One sentinel, briefly: a renewal must not wait for sentinels that do not answer.
    Endpoint master;
    try {
        master = find_master(1, std::min(m_options.connect_timeout, k_recheck_timeout));
    } catch (const Error&) {
        m_checked_at = Clock::now(); // the next one is asked a while later
        return false;                // meanwhile, stay with the master we have
    }
    if (master.host == m_server.host && master.port == m_server.port) {
        return false;
    }
    disconnect();
    return true;
}

Endpoint Connection::find_master(std::size_t tries, Milliseconds timeout) {
    const auto asked_at = Clock::now();
    const Endpoint master = ask_sentinels(m_options, m_sentinel, tries, timeout);
    m_checked_at = asked_at;
    return master;
}

void Connection::open(const RedisUrl& server) {
    m_server = server;
    m_first_reply_by = Clock::now() + m_options.connect_timeout;
    ReaderPtr reader(redisReaderCreate(), redisReaderFree);
    if (!reader) {
        throw InternalError("out of memory while connecting to Redis");
    }
    m_transport = Transport::open(server, m_options.tls, m_options.connect_timeout);
    m_reader = std::move(reader);
    try {
        handshake();
    } catch (...) {
        disconnect();
        throw;
    }
}

void Connection::open_master(const Endpoint& master) {
    const std::string& name = m_options.url.master_name;
    // The sentinels may not have noticed yet that the master died, or that another took over.
    auto failover_under_way = [&](const std::string& what) {
        disconnect();
        return Error(ExitCode::unavailable,
                     fmt::format("the sentinels name {} as the master '{}', but {} (a failover "
                                 "under way?)",
                                 master.describe(), printable(name), what),
                     Transience::transient);
    };
    try {
        open(m_options.url.at(master));
    } catch (const Error& error) {
        if (error.transience() != Transience::unreachable &&
            error.transience() != Transience::broken) {
            throw; // refused (a password, a certificate): the same on any server
        }
        throw failover_under_way(fmt::format("it cannot be reached ({})", error.what()));
    }
    const Reply role = exchange({"ROLE"}, Milliseconds{0}, -1);
    if (role.is_error()) {
        disconnect();
        throw_reply_error(role.text);
    }
    const std::string& kind = role.at(0).as_string();
    if (kind != "master") {
        throw failover_under_way(fmt::format("its role is '{}'", printable(kind)));
    }
}

bool Connection::from_former_master(const Reply& reply) {
    if (!through_sentinels() || !reply.is_error()) {
        return false;
    }
    const bool former = reply.text.rfind("READONLY", 0) == 0 || reply.text.rfind("UNBLOCKED", 0) == 0;
    if (former) {
        disconnect();
    }
    return former;
}

Milliseconds Connection::outage_window() const noexcept {
    return through_sentinels() ? k_failover_window : k_reconnect_window;
}

long long Connection::wait_for_replicas(long long replicas, Milliseconds timeout) {
    const Reply reply = command(std::vector<std::string>{"WAIT", std::to_string(replicas),
                                                         std::to_string(timeout.count())},
                                timeout);
    if (reply.is_error()) {
        throw_reply_error(reply.text);
    }
    return reply.as_integer();
}

void Connection::handshake() {
    const RedisUrl& url = m_server;
    if (url.password || url.user) {
        std::vector<std::string> auth{"AUTH"};
        if (url.user) {
            auth.push_back(*url.user);
        }
        auth.push_back(url.password.value_or(""));
        const Reply reply = exchange(auth, Milliseconds{0}, -1);
        if (reply.is_error()) {
            throw_reply_error(reply.text);
        }
    }
    if (url.db != 0) {
        const Reply reply = exchange({"SELECT", std::to_string(url.db)}, Milliseconds{0}, -1);
        if (reply.is_error()) {
            if (reply.text.find("DB index") != std::string::npos) {
                throw UsageError(fmt::format("Redis at {} has no database {} ({})", url.describe(),
                                             url.db, printable(reply.text, 100)));
            }
            throw_reply_error(reply.text);
        }
    }
}

void Connection::append(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lengths;
    argv.reserve(args.size());
    lengths.reserve(args.size());
    for (const std::string& arg : args) {
        argv.push_back(arg.data());
        lengths.push_back(arg.size());
    }
    char* formatted = nullptr;
    const int length = redisFormatCommandArgv(&formatted, static_cast<int>(args.size()),
                                              argv.data(), lengths.data());
    if (length < 0) {
        throw InternalError("out of memory while preparing a Redis command");
    }
    m_output.append(formatted, static_cast<std::size_t>(length));
    redisFreeCommand(formatted);
}

void Connection::flush() {
    try {
        m_transport->write_all(m_output, Clock::now() + m_options.command_timeout);
    } catch (...) {
        disconnect();
        throw;
    }
    m_output.clear();
}

Reply Connection::read_reply(Clock::time_point deadline, int interrupt_fd) {
    const std::string where = m_server.describe();
    void* raw = nullptr;
    for (;;) {
        if (redisReaderGetReply(m_reader.get(), &raw) != REDIS_OK) {
            const std::string reason = m_reader->errstr;
            disconnect();
            throw ConnectionLost(fmt::format("the server at {} did not answer like a Redis "
                                             "server ({})",
                                             where, printable(reason, 100)));
        }
        if (raw != nullptr) {
            break;
        }
        char buffer[16 * 1024];
        ReadResult read;
        try {
            read = m_transport->read_some(buffer, sizeof(buffer), deadline, interrupt_fd);
        } catch (const ConnectionLost& error) {
            const bool never_answered = m_first_reply_by.has_value();
            disconnect();
            if (never_answered && !plain_to_tls_hint().empty()) {
                // Still "broken": what we sent may have run before a CLIENT KILL or a restart.
                throw ConnectionLost(fmt::format("{}{}", error.what(), plain_to_tls_hint()));
            }
            throw;
        } catch (...) {
            disconnect();
            throw;
        }
        switch (read.status) {
        case ReadResult::Status::data:
            if (redisReaderFeed(m_reader.get(), buffer, read.size) != REDIS_OK) {
                disconnect();
                throw InternalError("out of memory while reading a Redis reply");
            }
            break;
        case ReadResult::Status::interrupted:
            disconnect();
            throw WaitInterrupted();
        case ReadResult::Status::closed: {
            const bool never_answered = m_first_reply_by.has_value();
            disconnect();
            if (never_answered) {
                // What we sent may have run (a CLIENT KILL, a restart): "broken", as below.
                throw ConnectionLost(
                    fmt::format("Redis at {} closed the connection before answering{}", where,
                                plain_to_tls_hint()));
            }
            throw ConnectionLost(
                fmt::format("Redis at {} closed the connection while reading a reply", where));
        }
        case ReadResult::Status::timed_out: {
            // The connect timeout ran out, not the command's own (which may be the shorter).
            const bool never_answered = m_first_reply_by && deadline >= *m_first_reply_by;
            disconnect();
            if (never_answered) {
                throw UnavailableError(
                    fmt::format("Redis at {} accepted the connection but did not answer within {} "
                                "(--connect-timeout)",
                                where, format_duration(m_options.connect_timeout)));
            }
            throw ConnectionLost(fmt::format("Redis at {} did not answer in time", where));
        }
        }
    }
    m_first_reply_by.reset();
    std::unique_ptr<redisReply, void (*)(void*)> reply(static_cast<redisReply*>(raw),
                                                       freeReplyObject);
    return convert(*reply);
}

Reply Connection::exchange(const std::vector<std::string>& args, Milliseconds budget,
                           int interrupt_fd) {
    if (m_first_reply_by && budget.count() > 0) {
        // A blocking command first: make sure the server answers at all.
        const Reply pong = exchange({"PING"}, Milliseconds{0}, interrupt_fd);
        if (pong.is_error()) {
            throw_reply_error(pong.text);
        }
    }
    append(args);
    flush();
    return read_reply(reply_deadline(budget), interrupt_fd);
}

std::string_view Connection::plain_to_tls_hint() const {
    // A TLS port resets a plain connection at its first request.
    const bool plain_tcp = !m_server.tls && m_server.kind == RedisUrl::Kind::tcp;
    return plain_tcp ? " (a TLS port? use rediss://)" : "";
}

Connection::Clock::time_point Connection::reply_deadline(Milliseconds budget) const {
    const auto deadline = Clock::now() + m_options.command_timeout + budget;
    return m_first_reply_by ? std::min(deadline, *m_first_reply_by) : deadline;
}

std::vector<Reply>
Connection::send_all(const std::vector<const std::vector<std::string>*>& commands) {
    std::vector<Reply> replies = send_all_once(commands);
    const auto former = [this](const Reply& reply) { return from_former_master(reply); };
    if (std::any_of(replies.begin(), replies.end(), former)) {
        // Nothing ran on a replica: send them all to the master found anew.
        replies = send_all_once(commands);
        if (const auto stale = std::find_if(replies.begin(), replies.end(), former);
            stale != replies.end()) {
            throw_stale_master(stale->text);
        }
    }
    return replies;
}

std::vector<Reply>
Connection::send_all_once(const std::vector<const std::vector<std::string>*>& commands) {
    connect();
    for (const auto* argv : commands) {
        append(*argv);
    }
    flush();
    std::vector<Reply> replies;
    replies.reserve(commands.size());
    for (std::size_t i = 0; i < commands.size(); ++i) {
        // Each reply gets the full command timeout: a batch is many small commands.
        replies.push_back(read_reply(reply_deadline(Milliseconds{0}), -1));
    }
    return replies;
}

std::string hiredis_version() {
    return fmt::format("{}.{}.{}", HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH);
}

Reply Connection::command(const Command& command, Milliseconds blocking_for, int interrupt_fd) {
    return this->command(command.argv, blocking_for, interrupt_fd);
}

Reply Connection::command(const std::vector<std::string>& argv, Milliseconds blocking_for,
                          int interrupt_fd) {
    connect();
    Reply reply = exchange(argv, blocking_for, interrupt_fd);
    if (from_former_master(reply)) {
        connect();
        reply = exchange(argv, blocking_for, interrupt_fd);
        if (from_former_master(reply)) {
            throw_stale_master(reply.text);
        }
    }
    return reply;
}

Reply Connection::call(const Command& command) {
    return call(command.argv);
}

Reply Connection::call(const std::vector<std::string>& argv) {
    Reply reply = command(argv);
    if (reply.is_error()) {
        throw_reply_error(reply.text);
    }
    return reply;
}

std::vector<Reply> Connection::pipeline(const std::vector<Command>& commands) {
    std::vector<const std::vector<std::string>*> argvs;
    argvs.reserve(commands.size());
    for (const Command& command : commands) {
        argvs.push_back(&command.argv);
    }
    return send_all(argvs);
}

Reply Connection::eval(const ScriptCall& call) {
    Reply reply = std::move(eval_pipeline({call}).front());
    if (reply.is_error()) {
        throw_script_error(call.script, reply.text);
    }
    return reply;
}

std::vector<Reply> Connection::eval_pipeline(const std::vector<ScriptCall>& calls) {
    std::vector<std::vector<std::string>> by_sha;
    by_sha.reserve(calls.size());
    for (const ScriptCall& call : calls) {
        by_sha.push_back(script_argv(call, true));
    }
    std::vector<const std::vector<std::string>*> argvs;
    for (const auto& argv : by_sha) {
        argvs.push_back(&argv);
    }
    std::vector<Reply> replies = send_all(argvs);
    // The server does not have the script cached (it restarted, or never ran it): send the
    // bodies of those calls, which caches them.
    std::vector<std::size_t> missing;
    std::vector<std::vector<std::string>> with_body;
    for (std::size_t i = 0; i < replies.size(); ++i) {
        if (replies[i].is_error() && replies[i].text.rfind("NOSCRIPT", 0) == 0) {
            missing.push_back(i);
            with_body.push_back(script_argv(calls[i], false));
        }
    }
    if (!missing.empty()) {
        argvs.clear();
        for (const auto& argv : with_body) {
            argvs.push_back(&argv);
        }
        std::vector<Reply> again = send_all(argvs);
        for (std::size_t k = 0; k < missing.size(); ++k) {
            replies[missing[k]] = std::move(again[k]);
        }
    }
    return replies;
}

void throw_script_error(const Script& script, const std::string& error) {
    const ReplyErrorMeaning meaning = classify_reply_error(error);
    if (meaning.code == ExitCode::internal) {
        throw InternalError(
            fmt::format("the {} script failed in Redis: {}", script.name, printable(error, 300)));
    }
    throw Error(meaning.code, meaning.message, meaning.transience);
}

} // namespace redsem
