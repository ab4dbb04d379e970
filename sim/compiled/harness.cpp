// Compiled harness of the FRED switch under Verilator: a shared library driven from Python
// (fred.sim.compiled.build loads it with ctypes).
//
// Built with a generated header switch_ports.h (fred.sim.compiled.build.ports_header): the
// top's ports as two flat word vectors, IN_WORDS words of inputs (every input but clk, in the
// order Python lists them) and OUT_WORDS words of outputs, each port padded to whole 32-bit
// words; apply_inputs() / read_outputs() copy them to and from the model; and the switch's
// sizes for the replay mode (P ports, WW words per wire word, the offsets of each port's
// signals in the vectors).
//
// Two modes:
//
// * lockstep (sim_cycle): one clock cycle per call. Python writes the input vector (sim_in),
//   calls sim_cycle, reads the output vector (sim_out). Per cycle: the falling edge with the
//   inputs applied, the model evaluated, the outputs sampled (what a cocotb bench reads in
//   ReadOnly after writing at FallingEdge), then the rising edge. The closed-loop
//   benches (Go-Back-N endpoints, the latency measurement) run their Python world between two
//   calls, bit for bit the logic they run under cocotb.
//
// * replay (sim_replay): bulk traffic without Python in the loop. Per input port a list of
//   packets (sealed wire words, their VC) sent whole once the port holds credits for every flit
//   (virtual cut-through, credits counted back from credit_o), one word per cycle unless the
//   source idles (a seeded splitmix64 pause per port); per output port a sink that stalls with a
//   seeded probability, takes the words, and returns one credit per flit (not per credit probe)
//   after 1..credit_delay cycles, at most credit_burst per VC per cycle. A port sends its
//   packets in order per VC, the next packet from the VCs in turn whose next packet has
//   credits. Recorded: every taken output word with its cycle, the stream rule on every output
//   (valid and payload held until taken), the cycle each input packet's last word was
//   accepted, every round start (cycle, vc, phase, ready_vcs); at the end the status outputs
//   (the error counters, the peak occupancy). The run stops when
//   every packet is sent and every output has its expected words, plus `drain` cycles (anything
//   extra shows then), or after `budget` cycles (a hang: status 1).
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <vector>

#include "Vtop.h"
#include "verilated.h"

typedef Vtop Top;

static inline void setw(CData& s, const uint32_t* w) { s = (CData)w[0]; }
static inline void setw(SData& s, const uint32_t* w) { s = (SData)w[0]; }
static inline void setw(IData& s, const uint32_t* w) { s = w[0]; }
static inline void setw(QData& s, const uint32_t* w) { s = (QData)w[0] | ((QData)w[1] << 32); }
template <std::size_t N> static inline void setw(VlWide<N>& s, const uint32_t* w) {
    for (std::size_t i = 0; i < N; i++) s[i] = w[i];
}
static inline void getw(const CData& s, uint32_t* w) { w[0] = s; }
static inline void getw(const SData& s, uint32_t* w) { w[0] = s; }
static inline void getw(const IData& s, uint32_t* w) { w[0] = s; }
static inline void getw(const QData& s, uint32_t* w) { w[0] = (uint32_t)s; w[1] = (uint32_t)(s >> 32); }
template <std::size_t N> static inline void getw(const VlWide<N>& s, uint32_t* w) {
    for (std::size_t i = 0; i < N; i++) w[i] = s[i];
}

#include "switch_ports.h"

struct Handle {
    VerilatedContext* ctx;
    Top* top;
    uint32_t in[IN_WORDS];
    uint32_t out[OUT_WORDS];
    uint64_t cycle;
};

// one cycle: the falling edge and the inputs in one evaluation (the design has no logic on the
// falling edge), the outputs sampled, the rising edge
static inline void one_cycle(Handle* h) {
    Top* t = h->top;
    t->clk = 0;
    apply_inputs(t, h->in);
    t->eval();
    read_outputs(t, h->out);
    t->clk = 1;
    t->eval();
    h->cycle++;
}

struct Rng {  // splitmix64
    uint64_t s;
    inline uint32_t next() {
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return (uint32_t)((z ^ (z >> 31)) >> 32);
    }
    // true with probability thresh / 2^32 (thresh 0: never)
    inline bool pause(uint32_t thresh) { return thresh && next() < thresh; }
    inline uint32_t below(uint32_t n) { return (uint32_t)(((uint64_t)next() * n) >> 32); }
};

// the replay's stimulus, as fred.sim.soak.switch.replay_stimulus lays it out (uint32 words):
//   idle, stall, credit_delay, credit_burst, drain, budget, rx_credits[4], depths[4],
//   then per port: n_packets, expected output words, then per packet: vc, n_words, words[n*WW]
struct Packet {
    uint32_t vc, n;
    const uint32_t* w;
};

static inline uint32_t field(const uint32_t* w, int off, int bits) {
    uint32_t v = w[off >> 5] >> (off & 31);
    if ((off & 31) + bits > 32) v |= w[(off >> 5) + 1] << (32 - (off & 31));
    return v & ((1u << bits) - 1);
}

extern "C" {

void* sim_new() {
    Handle* h = new Handle();
    h->ctx = new VerilatedContext;
    h->top = new Top{h->ctx};
    std::memset(h->in, 0, sizeof h->in);
    std::memset(h->out, 0, sizeof h->out);
    h->top->clk = 0;
    h->cycle = 0;
    apply_inputs(h->top, h->in);
    h->top->eval();
    return h;
}

void sim_free(void* p) {
    Handle* h = (Handle*)p;
    h->top->final();
    delete h->top;
    delete h->ctx;
    delete h;
}

uint32_t* sim_in(void* p) { return ((Handle*)p)->in; }
uint32_t* sim_out(void* p) { return ((Handle*)p)->out; }
uint64_t sim_cycles(void* p) { return ((Handle*)p)->cycle; }
int sim_in_words() { return IN_WORDS; }
int sim_out_words() { return OUT_WORDS; }

// n cycles with the same inputs; the outputs sampled in the last
void sim_cycle(void* p, uint32_t n) {
    Handle* h = (Handle*)p;
    for (uint32_t i = 0; i < n; i++) one_cycle(h);
}

// raw speed: n cycles with the current inputs, nothing sampled by anyone; returns seconds
double sim_raw(void* p, uint64_t n) {
    Handle* h = (Handle*)p;
    Top* t = h->top;
    apply_inputs(t, h->in);
    auto t0 = std::chrono::steady_clock::now();
    for (uint64_t i = 0; i < n; i++) {
        t->clk = 0;
        t->eval();
        t->clk = 1;
        t->eval();
    }
    h->cycle += n;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Replay (see the top of this file). `stim`: the stimulus words; the result goes to `res`
// (capacity `cap` words), laid out as
//   status (0 done, 1 budget exceeded, 2 result buffer full), cycles, n_rounds,
//   stream-rule violations, the cycle of the first,
//   per port: words taken, then (cycle, WW words) per taken word,
//   per port: packets sent, then (packet index, cycle its last word was accepted) per packet,
//   per round start: cycle, vc, phase (both sampled the cycle after), ready_vcs,
//   the output vector (OUT_WORDS words sampled in the last cycle: the status outputs)
// Returns the words written, and the seconds of the simulation loop in *secs.
uint64_t sim_replay(void* p, const uint32_t* stim, uint64_t seed, uint32_t* res, uint64_t cap,
                    double* secs) {
    Handle* h = (Handle*)p;
    const uint32_t* s = stim;
    uint32_t idle = *s++, stall = *s++, cdelay = *s++, cburst = *s++, drain = *s++, budget = *s++;
    uint32_t rx_credits[4], depths[4];
    for (int v = 0; v < 4; v++) rx_credits[v] = *s++;
    for (int v = 0; v < 4; v++) depths[v] = *s++;
    std::vector<Packet> pk[P];
    std::deque<uint32_t> vq[P][4];  // per port and VC: packet indices in order
    uint32_t expect[P];
    for (int q = 0; q < P; q++) {
        uint32_t n = *s++;
        expect[q] = *s++;
        pk[q].resize(n);
        for (uint32_t i = 0; i < n; i++) {
            pk[q][i].vc = *s++ & 3;
            pk[q][i].n = *s++;
            pk[q][i].w = s;
            s += (size_t)pk[q][i].n * WW;
            vq[q][pk[q][i].vc].push_back(i);
        }
    }
    Rng rin[P], rout[P], rcred[P];
    for (int q = 0; q < P; q++) {
        rin[q].s = seed * 0x100000001B3ull + 3 * q + 1;
        rout[q].s = seed * 0x100000001B3ull + 3 * q + 2;
        rcred[q].s = seed * 0x100000001B3ull + 3 * q + 3;
    }
    // sources: credits toward the switch's input buffers, from its depths; a port sends whole
    // packets, the next from the VCs (in turn) whose next packet has credits for every flit
    uint32_t credits[P][4];
    for (int q = 0; q < P; q++)
        for (int v = 0; v < 4; v++) credits[q][v] = depths[v];
    size_t pos[P] = {0}, left = 0;
    int32_t cur[P];
    int turn[P] = {0};
    bool holding[P] = {false};
    std::vector<uint32_t> sent_at[P];
    for (int q = 0; q < P; q++) { cur[q] = -1; left += pk[q].size(); }
    // sinks: credits due (cycle, vc), the VC of the packet arriving, a word offered and not taken
    std::deque<std::pair<uint64_t, uint32_t>> due[P];
    int in_vc[P];
    bool pend[P] = {false};
    uint32_t held[P][WW];
    uint32_t stream_bad = 0, first_bad = 0;
    std::vector<uint32_t> got[P];  // (cycle, WW words) per taken word
    std::vector<uint32_t> rounds;
    bool r_pend = false;
    uint32_t r_t = 0, r_ready = 0;
    for (int q = 0; q < P; q++) {
        in_vc[q] = -1;
        for (int v = 0; v < 4; v++)
            for (uint32_t i = 0; i < rx_credits[v]; i++) due[q].push_back({0, (uint32_t)v});
    }
    uint32_t status = 0;
    uint64_t start = h->cycle, done_at = 0;
    bool done = false;
    uint32_t* in = h->in;
    const uint32_t* out = h->out;
    uint32_t cmax = (1u << CREDIT_BITS) - 1;
    if (cburst < cmax) cmax = cburst;
    auto t0 = std::chrono::steady_clock::now();
    for (;;) {
        uint64_t now = h->cycle - start;
        if (now > budget) { status = 1; break; }
        for (int q = 0; q < P; q++) {
            // source q
            if (!holding[q]) {
                if (cur[q] < 0) {
                    for (int i = 0; i < 4; i++) {
                        int v = (turn[q] + i) & 3;
                        if (vq[q][v].empty()) continue;
                        const Packet& x = pk[q][vq[q][v].front()];
                        if (credits[q][v] < x.n) continue;
                        credits[q][v] -= x.n;
                        cur[q] = (int32_t)vq[q][v].front();
                        vq[q][v].pop_front();
                        pos[q] = 0;
                        turn[q] = (v + 1) & 3;
                        break;
                    }
                }
                if (cur[q] >= 0 && !rin[q].pause(idle)) {
                    std::memcpy(in + OFF_IN_PAYLOAD[q], pk[q][cur[q]].w + pos[q] * WW, 4 * WW);
                    in[OFF_IN_VALID[q]] = 1;
                    holding[q] = true;
                } else {
                    in[OFF_IN_VALID[q]] = 0;
                }
            }
            // sink q: ready, and the credits due now (at most cmax per VC)
            in[OFF_OUT_READY[q]] = !rout[q].pause(stall);
            uint32_t cw = 0;
            if (!due[q].empty() && due[q].front().first <= now) {
                uint32_t cnt[4] = {0, 0, 0, 0};
                size_t nd = due[q].size();
                for (size_t i = 0; i < nd; i++) {
                    auto d = due[q].front();
                    due[q].pop_front();
                    if (d.first <= now && cnt[d.second] < cmax) cnt[d.second]++;
                    else due[q].push_back(d);
                }
                for (int v = 0; v < 4; v++) cw |= cnt[v] << (v * CREDIT_BITS);
            }
            in[OFF_CREDIT_I[q]] = cw;
        }
        one_cycle(h);
        for (int q = 0; q < P; q++) {
            if (holding[q] && out[OFF_IN_READY[q]]) {
                holding[q] = false;
                if (++pos[q] == pk[q][cur[q]].n) {
                    sent_at[q].push_back((uint32_t)cur[q]);
                    sent_at[q].push_back((uint32_t)now);
                    cur[q] = -1;
                    left--;
                }
            }
            uint32_t co = out[OFF_CREDIT_O[q]];
            if (co)
                for (int v = 0; v < 4; v++) credits[q][v] += (co >> (v * CREDIT_BITS)) & ((1u << CREDIT_BITS) - 1);
            bool valid = out[OFF_OUT_VALID[q]];
            const uint32_t* w = out + OFF_OUT_PAYLOAD[q];
            if (pend[q] && (!valid || std::memcmp(w, held[q], 4 * WW))) {
                if (!stream_bad) first_bad = (uint32_t)now;
                stream_bad++;
            }
            pend[q] = false;
            if (!valid) continue;
            if (!in[OFF_OUT_READY[q]]) {
                pend[q] = true;
                std::memcpy(held[q], w, 4 * WW);
                continue;
            }
            got[q].push_back((uint32_t)now);
            got[q].insert(got[q].end(), w, w + WW);
            if (!field(w, OFF_PROBE, 1)) {
                if (in_vc[q] < 0) in_vc[q] = (int)field(w, OFF_DATA_VC, 2);
                uint32_t dl = 1 + (cdelay > 1 ? rcred[q].below(cdelay) : 0);
                due[q].push_back({now + dl, (uint32_t)in_vc[q]});
                if (field(w, OFF_LAST, 1)) in_vc[q] = -1;
            }
        }
        if (r_pend) {
            rounds.push_back(r_t);
            rounds.push_back(out[OFF_ACT_VC]);
            rounds.push_back(out[OFF_ACT_PHASE]);
            rounds.push_back(r_ready);
            r_pend = false;
        }
        if (out[OFF_ROUND_START]) {
            r_pend = true;
            r_t = (uint32_t)now;
            r_ready = out[OFF_READY_VCS];
        }
        if (!done) {
            bool all = left == 0;
            for (int q = 0; q < P && all; q++) all = got[q].size() / (WW + 1) >= expect[q];
            if (all) { done = true; done_at = now; }
        } else if (now - done_at >= drain) {
            break;
        }
    }
    *secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    uint64_t need = 5 + OUT_WORDS + rounds.size();
    for (int q = 0; q < P; q++) need += 2 + got[q].size() + sent_at[q].size();
    if (need > cap) {
        res[0] = 2;
        res[1] = (uint32_t)need;
        return 2;
    }
    uint32_t* r = res;
    *r++ = status;
    *r++ = (uint32_t)(h->cycle - start);
    *r++ = (uint32_t)(rounds.size() / 4);
    *r++ = stream_bad;
    *r++ = first_bad;
    for (int q = 0; q < P; q++) {
        *r++ = (uint32_t)(got[q].size() / (WW + 1));
        std::memcpy(r, got[q].data(), 4 * got[q].size());
        r += got[q].size();
    }
    for (int q = 0; q < P; q++) {
        *r++ = (uint32_t)(sent_at[q].size() / 2);
        std::memcpy(r, sent_at[q].data(), 4 * sent_at[q].size());
        r += sent_at[q].size();
    }
    std::memcpy(r, rounds.data(), 4 * rounds.size());
    r += rounds.size();
    std::memcpy(r, out, 4 * OUT_WORDS);
    r += OUT_WORDS;
    return (uint64_t)(r - res);
}

}  // extern "C"
