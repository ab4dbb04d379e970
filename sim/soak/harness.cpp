// Compiled soak harness of a FRED stream block (a cell or a fabric) under Verilator.
//
// Built by fred.sim.soak.builder with a generated wrapper (module `soak_top`, ports in<k>_valid,
// in<k>_ready, in<k>_payload, out<j>_..., cfg, clk, rst) and a generated header soak_ports.h
// (N_IN, N_OUT, PW = payload words, CW = cfg words, bind_ports()). It replays the stimulus file
// written by fred.sim.soak.batch_io, phase by phase, and writes every transfer to the result file;
// Python compares the results with the golden model. No checking of values here, except the
// stream rule on every output (valid and payload held until taken), counted per phase.
//
//   soak_sim run IN OUT SEED      replay IN, write OUT; prints "cycles N seconds S"
//   soak_sim raw IN CYCLES        the first phase's cfg, every input valid, every output ready,
//                                 no recording: the raw Verilator speed; same print
//
// Per cycle: after the falling edge, sources offer (valid + payload, held until taken; a new
// beat is offered unless the source idles, probability `idle`), sinks set ready (stall
// probability `stall`); eval; the handshakes are sampled; then the rising edge. Pauses come
// from one splitmix64 stream per port, seeded from SEED. A phase loads cfg while the block is
// drained, runs until every source is empty and every output got its expected beats, then
// `drain` more cycles (anything arriving then is an extra beat, recorded for Python to see);
// more than `budget` cycles is a hang: status 1, and the run stops.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "Vsoak_top.h"
#include "verilated.h"
#if VM_TRACE
#include "verilated_vcd_c.h"
#endif

typedef Vsoak_top Top;
#include "soak_ports.h"

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

static const uint32_t MAGIC_IN = 0x4B534652u;   // "RFSK"
static const uint32_t MAGIC_OUT = 0x4F534652u;  // "RFSO"

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
};

struct Phase {
    uint32_t cfg[CW];
    uint32_t idle, stall, drain, budget;
    uint32_t n_in[N_IN], n_out[N_OUT];
    std::vector<uint32_t> data[N_IN];
};

static void die(const char* what) {
    std::fprintf(stderr, "soak_sim: %s\n", what);
    std::exit(2);
}

static void rd(FILE* f, uint32_t* p, size_t n) {
    if (std::fread(p, 4, n, f) != n) die("stimulus file truncated");
}

static bool read_phase(FILE* f, Phase& ph) {
    rd(f, ph.cfg, CW);
    uint32_t hdr[4];
    rd(f, hdr, 4);
    ph.idle = hdr[0], ph.stall = hdr[1], ph.drain = hdr[2], ph.budget = hdr[3];
    rd(f, ph.n_in, N_IN);
    rd(f, ph.n_out, N_OUT);
    for (int k = 0; k < N_IN; k++) {
        ph.data[k].resize((size_t)ph.n_in[k] * PW);
        if (ph.n_in[k]) rd(f, ph.data[k].data(), ph.data[k].size());
    }
    return true;
}

struct Sim {
    Top* t;
    Ports p;
    uint64_t cycle = 0;
#if VM_TRACE
    // WAVES=1 builds: FRED_SOAK_VCD names the VCD file (10 ns clock, like the cocotb benches)
    VerilatedVcdC* vcd = nullptr;
    explicit Sim(Top* top) : t(top) {
        bind_ports(t, p);
        const char* path = std::getenv("FRED_SOAK_VCD");
        if (path && *path) {
            Verilated::traceEverOn(true);
            vcd = new VerilatedVcdC;
            t->trace(vcd, 99);
            vcd->open(path);
        }
    }
    ~Sim() { if (vcd) { vcd->close(); delete vcd; } }
    inline void dump(uint64_t ns) { if (vcd) vcd->dump(ns); }
#else
    explicit Sim(Top* top) : t(top) { bind_ports(t, p); }
    inline void dump(uint64_t) {}
#endif
    inline void fall() { t->clk = 0; t->eval(); dump(10 * cycle + 5); }
    inline void rise() { t->clk = 1; t->eval(); cycle++; dump(10 * cycle); }
    void reset() {
        t->rst = 1;
        for (int k = 0; k < N_IN; k++) *p.in_valid[k] = 0;
        for (int j = 0; j < N_OUT; j++) *p.out_ready[j] = 0;
        for (int c = 0; c < 2; c++) { fall(); rise(); }
        t->rst = 0;
    }
};

// one phase; returns false on a hang (budget exceeded)
static bool run_phase(Sim& s, Phase& ph, Rng* rin, Rng* rout, std::vector<uint32_t>& out) {
    setw(*s.p.cfg, ph.cfg);
    for (int k = 0; k < N_IN; k++) *s.p.in_valid[k] = 0;
    for (int c = 0; c < 2; c++) { s.fall(); s.rise(); }
    uint64_t start = s.cycle;
    size_t pos[N_IN] = {0};
    bool holding[N_IN] = {false};
    std::vector<uint32_t> in_cyc[N_IN];
    std::vector<uint32_t> out_cyc[N_OUT], out_pay[N_OUT];
    for (int j = 0; j < N_OUT; j++) {
        out_cyc[j].reserve(ph.n_out[j] + 16);
        out_pay[j].reserve(((size_t)ph.n_out[j] + 16) * PW);
    }
    for (int k = 0; k < N_IN; k++) in_cyc[k].reserve(ph.n_in[k]);
    bool pending[N_OUT] = {false};
    uint32_t held[N_OUT][PW];
    uint32_t word[PW];
    uint32_t stream_bad = 0, unused_ready = 0, first_bad = 0;
    uint64_t done_at = 0;
    bool done = false;
    for (;;) {
        if (s.cycle - start > ph.budget) return false;
        // after the falling edge: sources and sinks decide
        for (int k = 0; k < N_IN; k++) {
            if (!holding[k] && pos[k] < ph.n_in[k] && !rin[k].pause(ph.idle)) {
                setw(*s.p.in_payload[k], &ph.data[k][pos[k] * PW]);
                *s.p.in_valid[k] = 1;
                holding[k] = true;
            } else if (!holding[k]) {
                *s.p.in_valid[k] = 0;
            }
        }
        for (int j = 0; j < N_OUT; j++) *s.p.out_ready[j] = !rout[j].pause(ph.stall);
        s.fall();
        uint32_t now = (uint32_t)(s.cycle - start);
        for (int k = 0; k < N_IN; k++) {
            bool r = *s.p.in_ready[k];
            if (holding[k] && r) { in_cyc[k].push_back(now); pos[k]++; holding[k] = false; }
            else if (r && ph.n_in[k] == 0) unused_ready++;
        }
        for (int j = 0; j < N_OUT; j++) {
            bool v = *s.p.out_valid[j];
            if (pending[j] || v) getw(*s.p.out_payload[j], word);
            if (pending[j] && (!v || std::memcmp(word, held[j], sizeof word))) {
                if (!stream_bad) first_bad = now;
                stream_bad++;
            }
            pending[j] = false;
            if (!v) continue;
            if (*s.p.out_ready[j]) {
                out_cyc[j].push_back(now);
                out_pay[j].insert(out_pay[j].end(), word, word + PW);
            } else {
                pending[j] = true;
                std::memcpy(held[j], word, sizeof word);
            }
        }
        s.rise();
        if (!done) {
            bool all = true;
            for (int k = 0; k < N_IN && all; k++) all = pos[k] == ph.n_in[k];
            for (int j = 0; j < N_OUT && all; j++) all = out_cyc[j].size() >= ph.n_out[j];
            if (all) { done = true; done_at = s.cycle; }
        } else if (s.cycle - done_at >= ph.drain) {
            break;
        }
    }
    out.push_back((uint32_t)(s.cycle - start));
    out.push_back(stream_bad);
    out.push_back(first_bad);
    out.push_back(unused_ready);
    for (int k = 0; k < N_IN; k++) out.push_back((uint32_t)in_cyc[k].size());
    for (int j = 0; j < N_OUT; j++) out.push_back((uint32_t)out_cyc[j].size());
    for (int k = 0; k < N_IN; k++) out.insert(out.end(), in_cyc[k].begin(), in_cyc[k].end());
    for (int j = 0; j < N_OUT; j++) {
        out.insert(out.end(), out_cyc[j].begin(), out_cyc[j].end());
        out.insert(out.end(), out_pay[j].begin(), out_pay[j].end());
    }
    return true;
}

static FILE* open_stimulus(const char* path, uint32_t& n_phases) {
    FILE* f = std::fopen(path, "rb");
    if (!f) die("cannot open the stimulus file");
    uint32_t hdr[5];
    rd(f, hdr, 5);
    if (hdr[0] != MAGIC_IN) die("not a stimulus file");
    if (hdr[1] != N_IN || hdr[2] != N_OUT || hdr[3] != PW || hdr[4] != CW)
        die("stimulus file made for another design");
    rd(f, &n_phases, 1);
    return f;
}

static double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

static int run(Top* top, const char* in_path, const char* out_path, uint64_t seed) {
    uint32_t n_phases;
    FILE* f = open_stimulus(in_path, n_phases);
    FILE* g = std::fopen(out_path, "wb");
    if (!g) die("cannot open the result file");
    Rng rin[N_IN], rout[N_OUT];
    for (int k = 0; k < N_IN; k++) rin[k].s = seed * 0x100000001B3ull + 2 * k + 1;
    for (int j = 0; j < N_OUT; j++) rout[j].s = seed * 0x100000001B3ull + 2 * j + 2 + 0x5151;
    Sim s(top);
    s.reset();
    uint32_t status = 0, ran = 0;
    std::vector<uint32_t> out;
    auto t0 = std::chrono::steady_clock::now();
    for (uint32_t i = 0; i < n_phases; i++) {
        Phase ph;
        read_phase(f, ph);
        out.clear();
        bool ok = run_phase(s, ph, rin, rout, out);
        if (!ok) { status = 1; break; }
        uint32_t len = (uint32_t)out.size();
        std::fwrite(&len, 4, 1, g);
        std::fwrite(out.data(), 4, out.size(), g);
        ran++;
    }
    double secs = seconds_since(t0);
    uint32_t tail[4] = {MAGIC_OUT, status, ran, (uint32_t)s.cycle};
    std::fwrite(tail, 4, 4, g);
    std::fclose(g);
    std::fclose(f);
    std::printf("cycles %llu seconds %.6f\n", (unsigned long long)s.cycle, secs);
    return 0;
}

static int raw(Top* top, const char* in_path, uint64_t cycles) {
    uint32_t n_phases;
    FILE* f = open_stimulus(in_path, n_phases);
    if (!n_phases) die("the stimulus file has no phase");
    Phase ph;
    read_phase(f, ph);
    std::fclose(f);
    Sim s(top);
    s.reset();
    setw(*s.p.cfg, ph.cfg);
    uint32_t zero[PW] = {0};
    for (int k = 0; k < N_IN; k++) {
        setw(*s.p.in_payload[k], ph.n_in[k] ? &ph.data[k][0] : zero);
        *s.p.in_valid[k] = 1;
    }
    for (int j = 0; j < N_OUT; j++) *s.p.out_ready[j] = 1;
    auto t0 = std::chrono::steady_clock::now();
    for (uint64_t c = 0; c < cycles; c++) { s.fall(); s.rise(); }
    std::printf("cycles %llu seconds %.6f\n", (unsigned long long)cycles, seconds_since(t0));
    return 0;
}

int main(int argc, char** argv) {
    const std::unique_ptr<VerilatedContext> ctx{new VerilatedContext};
    const std::unique_ptr<Top> top{new Top{ctx.get()}};
    if (argc == 5 && !std::strcmp(argv[1], "run"))
        return run(top.get(), argv[2], argv[3], std::strtoull(argv[4], nullptr, 0));
    if (argc == 4 && !std::strcmp(argv[1], "raw"))
        return raw(top.get(), argv[2], std::strtoull(argv[3], nullptr, 0));
    std::fprintf(stderr, "usage: soak_sim run IN OUT SEED | soak_sim raw IN CYCLES\n");
    return 2;
}
