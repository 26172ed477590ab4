#pragma once

#include <chrono>
#include <cstddef>
#include <memory>

#include "redis/url.hpp"

namespace redsem {

struct ConnectOptions;
class ServerConnection;

// The sentinel to ask first, and an open connection to it.
struct SentinelChoice {
    std::size_t first = 0;
    std::unique_ptr<ServerConnection> connection; // to sentinel `first`, when one answered

    SentinelChoice();
    ~SentinelChoice();
    SentinelChoice(SentinelChoice&&) noexcept;
    SentinelChoice& operator=(SentinelChoice&&) noexcept;
};

// Asks the sentinels of `options.url` (a redis-sentinel:// URL) where its master is: up to
// `tries` of them in turn, starting with `choice.first` (over the connection kept to it), all
// within `timeout` (each gets an even share of what is left: a silent one cannot use up the
// others' time), and returns the address the first one that knows the master gives.
// `choice` then keeps that sentinel and the connection to it, for the next question; after a
// failure it points at the sentinel after the last one asked.
//
// Throws DeniedError when none answered and one refused the sentinel password (or wants one);
// UnavailableError when none answered (naming why for each: unreachable, silent, an error
// reply, no address), or when those that answer know no master of that name; UsageError for
// TLS files that cannot be used.
Endpoint ask_sentinels(const ConnectOptions& options, SentinelChoice& choice, std::size_t tries,
                       std::chrono::milliseconds timeout);

} // namespace redsem
