// heartbeat-auth — a client session against a (simulated, in-process) server.
//
// The client connects, starts a heartbeat thread that keeps the session
// alive, logs in with a challenge-response handshake, runs a few requests
// and disconnects.  The server speaks a small protocol: HELLO (gets a
// challenge), AUTH (proof of the password), HEARTBEAT, GET, BYE.  It closes a
// session that breaks the protocol, e.g. one that sends a heartbeat before it
// has authenticated.  The link between the two simulates a network: every
// round trip takes a variable time.
//
// Exit status: 0 if the session worked, 1 (one line on stderr) if it did not.
//
// Build: g++ -std=c++17 -g -O1 -pthread -Wall -Wextra -Werror -o heartbeat-auth heartbeat_auth.cpp
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <thread>

namespace session {

using Clock = std::chrono::steady_clock;
using std::chrono::microseconds;
using std::chrono::milliseconds;

// ---- protocol ------------------------------------------------------------

enum class Op { Hello, Auth, Heartbeat, Get, Bye };
enum class Status { Ok, Challenge, Denied, Closed, NotFound };

struct Frame {
    Op op;
    std::string user;
    uint64_t value = 0;     // AUTH: proof; HEARTBEAT: sequence; GET: key
};

struct Reply {
    Status status;
    uint64_t value;         // HELLO: nonce; GET: the value
    std::string text;       // HELLO: the salt; CLOSED: the reason

    Reply(Status s, uint64_t v = 0, std::string t = {}) : status(s), value(v), text(std::move(t)) {}
};

// Salted, iterated hash of a password (the server stores only the result).
uint64_t derive_key(const std::string& password, uint64_t salt, int rounds)
{
    uint64_t h = salt ^ 0xcbf29ce484222325ull;
    for (int r = 0; r < rounds; r++)
        for (unsigned char c : password) {
            h ^= c + static_cast<uint64_t>(r);
            h *= 0x100000001b3ull;
            h ^= h >> 29;
        }
    return h;
}

uint64_t prove(uint64_t key, uint64_t nonce)
{
    uint64_t h = key ^ (nonce * 0x9E3779B97F4A7C15ull);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 27);
}

// ---- the server ------------------------------------------------------------

class Server {
public:
    static constexpr int kRounds = 2000;

    Server()
    {
        accounts_["alice"] = { 0x5a17, derive_key("correct horse", 0x5a17, kRounds) };
        for (uint64_t k = 1; k <= 64; k++)
            data_[k] = k * k + 7;
    }

    uint32_t accept()
    {
        std::lock_guard<std::mutex> g(mu_);
        uint32_t id = next_id_++;
        sessions_[id] = Session{};
        return id;
    }

    Reply handle(uint32_t sid, const Frame& f)
    {
        std::lock_guard<std::mutex> g(mu_);
        Session& s = sessions_[sid];
        if (s.state == State::Closed)
            return { Status::Closed, 0, s.reason };
        switch (f.op) {
        case Op::Hello: {
            auto a = accounts_.find(f.user);
            if (a == accounts_.end())
                return close(s, "unknown user");
            s.user = f.user;
            s.nonce = ++nonce_seed_ * 0x2545F4914F6CDD1Dull;
            s.state = State::Challenged;
            return { Status::Challenge, s.nonce, std::to_string(a->second.salt) };
        }
        case Op::Auth:
            if (s.state != State::Challenged)
                return close(s, "AUTH without HELLO");
            if (f.value != prove(accounts_[s.user].key, s.nonce))
                return close(s, "bad credentials");
            s.state = State::Authenticated;
            return { Status::Ok };
        case Op::Heartbeat:
            if (s.state != State::Authenticated)
                return close(s, "heartbeat on an unauthenticated session");
            s.last_heartbeat = f.value;
            return { Status::Ok };
        case Op::Get: {
            if (s.state != State::Authenticated)
                return close(s, "GET on an unauthenticated session");
            auto d = data_.find(f.value);
            if (d == data_.end())
                return { Status::NotFound };
            return { Status::Ok, d->second };
        }
        case Op::Bye:
            s.state = State::Closed;
            s.reason = "bye";
            return { Status::Ok };
        }
        return close(s, "bad frame");
    }

private:
    enum class State { Connected, Challenged, Authenticated, Closed };
    struct Session {
        State state = State::Connected;
        std::string user;
        uint64_t nonce = 0;
        uint64_t last_heartbeat = 0;
        std::string reason;
    };
    struct Account {
        uint64_t salt;
        uint64_t key;
    };

    Reply close(Session& s, const char* why)
    {
        s.state = State::Closed;
        s.reason = why;
        return { Status::Closed, 0, why };
    }

    std::mutex mu_;
    std::map<std::string, Account> accounts_;
    std::map<uint64_t, uint64_t> data_;
    std::map<uint32_t, Session> sessions_;
    uint32_t next_id_ = 1;
    uint64_t nonce_seed_ = 0;
};

// ---- the client ------------------------------------------------------------

// One connection to the server.  A round trip costs a network delay of
// 0.2 ms plus jitter.
class Link {
public:
    explicit Link(Server& server) : server_(server), sid_(server.accept()), rng_(std::random_device{}()) {}

    Reply roundtrip(const Frame& f)
    {
        std::exponential_distribution<double> jitter(1.0 / 700.0);   // mean 0.7 ms
        microseconds delay(200 + static_cast<long>(jitter_lock(jitter)));
        std::this_thread::sleep_for(delay / 2);
        Reply r = server_.handle(sid_, f);
        std::this_thread::sleep_for(delay / 2);
        return r;
    }

private:
    double jitter_lock(std::exponential_distribution<double>& d)
    {
        std::lock_guard<std::mutex> g(rng_mu_);
        return d(rng_);
    }

    Server& server_;
    uint32_t sid_;
    std::mutex rng_mu_;
    std::mt19937_64 rng_;
};

bool send_heartbeat(Link& link, unsigned seq)
{
    Frame f{ Op::Heartbeat, {}, seq };
    return link.roundtrip(f).status == Status::Ok;
}

struct Credentials {
    std::string user;
    std::string password;
};

class Client {
public:
    explicit Client(Server& server) : server_(server) {}
    ~Client() { disconnect(); }

    // Opens the link and starts keeping it alive.
    void connect(milliseconds heartbeat_interval)
    {
        link_ = std::make_unique<Link>(server_);
        Link* link = link_.get();
        heartbeat_ = std::thread([this, link, heartbeat_interval] {
            unsigned seq = 0;
            std::unique_lock<std::mutex> lk(mu_);
            while (!stop_cv_.wait_for(lk, heartbeat_interval, [this] { return stopping_; })) {
                lk.unlock();
                bool ok = send_heartbeat(*link, ++seq);
                lk.lock();
                if (!ok)
                    break;      // the session is gone; the next call reports it
            }
        });
    }

    // Challenge-response login.  On failure, error() says why.
    bool login(const Credentials& c)
    {
        Reply hello = link_->roundtrip(Frame{ Op::Hello, c.user, 0 });
        if (hello.status != Status::Challenge)
            return fail("HELLO", hello);
        uint64_t salt = std::stoull(hello.text);
        uint64_t key = derive_key(c.password, salt, Server::kRounds);
        Reply auth = link_->roundtrip(Frame{ Op::Auth, c.user, prove(key, hello.value) });
        if (auth.status != Status::Ok)
            return fail("AUTH", auth);
        return true;
    }

    bool get(uint64_t key, uint64_t* value)
    {
        Reply r = link_->roundtrip(Frame{ Op::Get, {}, key });
        if (r.status != Status::Ok)
            return fail("GET", r);
        *value = r.value;
        return true;
    }

    void disconnect()
    {
        if (!link_)
            return;
        {
            std::lock_guard<std::mutex> g(mu_);
            stopping_ = true;
        }
        stop_cv_.notify_all();
        if (heartbeat_.joinable())
            heartbeat_.join();
        link_->roundtrip(Frame{ Op::Bye, {}, 0 });
        link_.reset();
    }

    const std::string& error() const { return error_; }

private:
    bool fail(const char* what, const Reply& r)
    {
        error_ = std::string(what) + " failed: " +
                 (r.status == Status::Closed ? "server closed the session (" + r.text + ")"
                                             : std::string("request refused"));
        return false;
    }

    Server& server_;
    std::unique_ptr<Link> link_;
    std::thread heartbeat_;
    std::mutex mu_;
    std::condition_variable stop_cv_;
    bool stopping_ = false;
    std::string error_;
};

}  // namespace session

using namespace session;

int main()
{
    Server server;
    Client client(server);

    client.connect(milliseconds(2));
    if (!client.login(Credentials{ "alice", "correct horse" })) {
        std::fprintf(stderr, "heartbeat-auth: %s\n", client.error().c_str());
        return 1;
    }
    uint64_t sum = 0;
    for (uint64_t k = 1; k <= 8; k++) {
        uint64_t v = 0;
        if (!client.get(k, &v)) {
            std::fprintf(stderr, "heartbeat-auth: %s\n", client.error().c_str());
            return 1;
        }
        sum += v;
    }
    client.disconnect();
    return sum == 260 ? 0 : 2;
}
