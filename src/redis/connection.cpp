#include "redis/connection.hpp"

#include "util/duration.hpp"
#include "util/name.hpp"

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
        return;
    }
    m_first_reply_by = Clock::now() + m_options.connect_timeout;
    ReaderPtr reader(redisReaderCreate(), redisReaderFree);
    if (!reader) {
        throw InternalError("out of memory while connecting to Redis");
    }
    m_transport = Transport::open(m_options.url, m_options.tls, m_options.connect_timeout);
    m_reader = std::move(reader);
    try {
        handshake();
    } catch (...) {
        disconnect();
        throw;
    }
}

void Connection::handshake() {
    const RedisUrl& url = m_options.url;
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
    const std::string where = m_options.url.describe();
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
    const bool plain_tcp = !m_options.url.tls && m_options.url.kind == RedisUrl::Kind::tcp;
    return plain_tcp ? " (a TLS port? use rediss://)" : "";
}

Connection::Clock::time_point Connection::reply_deadline(Milliseconds budget) const {
    const auto deadline = Clock::now() + m_options.command_timeout + budget;
    return m_first_reply_by ? std::min(deadline, *m_first_reply_by) : deadline;
}

std::vector<Reply>
Connection::send_all(const std::vector<const std::vector<std::string>*>& commands) {
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
    return exchange(argv, blocking_for, interrupt_fd);
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
