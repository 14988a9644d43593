/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ccl_core.h - fixed-point helpers shared by every controller's arithmetic core.
 *
 * The *_core.h headers hold each controller's arithmetic as pure functions on
 * plain integers.  They are compiled twice from this one source:
 *   - into the BPF objects, where CCL_CORE expands to static __always_inline;
 *   - into the host library loader/build.rs builds with the `cc` crate
 *     (bpf/core/host_core.c), where CCL_CORE gives external linkage, so the
 *     Rust unit tests call exactly this code (declarations via bindgen) and
 *     check it against an f64 model of the papers' equations.
 * No kernel types, no helpers, no globals: integers in, integers out.
 */
#ifndef __CCL_CORE_H
#define __CCL_CORE_H

#include "../ccload_intf.h"

#ifdef __bpf__
#define CCL_CORE static __always_inline
/* A core function the verifier checks once, on its own (global subprogram):
 * for loops and branches that would otherwise be explored once per path of
 * the caller (ccpd's cong_control on 6.1: 457k instructions processed, 110k
 * with the ACK's steps global; the limit is 1M). */
#define CCL_CORE_GLOBAL __attribute__((noinline))
#else
#define CCL_CORE
#define CCL_CORE_GLOBAL
#endif

#ifndef __bpf__
#include <stdbool.h>
#endif

/*
 * Add v to a counter in a per-CPU map value (or, on the host, in a plain
 * struct).  Atomic: per-CPU does not mean one writer.  A hook that runs in
 * process context (the socket backlog drained by release_sock(), sendmsg)
 * runs with softirqs enabled, so an interrupt can run another socket's hook
 * on the same CPU between the load and the store of a plain `+=`, and one
 * of the two updates is lost (with dozens of flows, megabytes of
 * bytes_acked in a run).  The atomic add (BPF_ATOMIC | BPF_ADD,
 * a locked add on a cache line only this CPU writes) costs a few ns.
 */
#define CCL_ADD(p, v) ((void)__sync_fetch_and_add((p), (v)))

#define CCL_U32_MAX 0xffffffffU
#define CCL_USEC_PER_SEC 1000000ULL
#define CCL_NSEC_PER_SEC 1000000000ULL

/* enum tcp_ca_state values (kernel ABI), for cores that take a state. */
enum ccl_ca_state {
	CCL_CA_OPEN = 0,
	CCL_CA_DISORDER = 1,
	CCL_CA_CWR = 2,
	CCL_CA_RECOVERY = 3,
	CCL_CA_LOSS = 4,
};

/*
 * A connection's place in [0, 2^32) for a share rule (bpf/cgroup.bpf.c): a
 * keyed hash of the peer's address (four words, IPv4 as IPv4-mapped IPv6)
 * and the two ports.  Each word is mixed in by xor and a multiply by the
 * golden ratio, then murmur3's 32-bit finaliser spreads every input bit
 * over the result, so a share s of the range holds s of the connections
 * (host test: within binomial bounds, for neighbouring ports and addresses
 * too).  The key, random per binding, keeps two bindings' arms apart.
 */
CCL_CORE u32 ccl_conn_hash(u32 key, u32 a0, u32 a1, u32 a2, u32 a3, u32 ports)
{
	u32 w[5] = { a0, a1, a2, a3, ports };
	u32 h = key ^ 0x811c9dc5U;
	int i;

	for (i = 0; i < 5; i++) {
		h ^= w[i];
		h *= 0x9e3779b1U;
		h ^= h >> 16;
	}
	h ^= h >> 16;
	h *= 0x85ebca6bU;
	h ^= h >> 13;
	h *= 0xc2b2ae35U;
	h ^= h >> 16;
	return h;
}

CCL_CORE u64 ccl_min64(u64 a, u64 b)
{
	return a < b ? a : b;
}

CCL_CORE u64 ccl_max64(u64 a, u64 b)
{
	return a > b ? a : b;
}

CCL_CORE s64 ccl_smin(s64 a, s64 b)
{
	return a < b ? a : b;
}

CCL_CORE s64 ccl_smax(s64 a, s64 b)
{
	return a > b ? a : b;
}

/* Saturate to u32 (estimates are carried in u32 fields). */
CCL_CORE u32 ccl_sat32(u64 v)
{
	return v > CCL_U32_MAX ? CCL_U32_MAX : (u32)v;
}

/* Signed division by a positive divisor without BPF cpu v4 sdiv: divide the
 * magnitude and re-apply the sign (rounds toward zero, as C does). */
CCL_CORE s64 ccl_sdiv(s64 a, u64 b)
{
	u64 q;

	if (!b)
		return 0;
	if (a < 0) {
		q = (u64)(-a) / b;
		return -(s64)q;
	}
	return (s64)((u64)a / b);
}

/* Signed multiply-and-shift, x * m >> 10 with arithmetic shift.  No overflow
 * while |x| < 2^49 and m < 2^14 (tunables are clamped far below that). */
CCL_CORE s64 ccl_smul_q10(s64 x, u32 m)
{
	return (x * (s64)m) >> 10;
}

/*
 * segs(rate, dt) = rate * dt * 1024 / 1e6: segments (Q10) that a rate of
 * rate_sps segments/s carries in dt_us microseconds.
 * no overflow for rate <= 1e7 seg/s (~115 Gb/s) and dt <= 10 s; larger inputs
 * are clamped to those bounds.
 */
CCL_CORE u64 ccl_segs_q10(u64 rate_sps, u64 dt_us)
{
	rate_sps = ccl_min64(rate_sps, 10000000ULL);
	dt_us = ccl_min64(dt_us, 10000000ULL);
	return rate_sps * dt_us * 1024 / CCL_USEC_PER_SEC;
}

/*
 * floor(sqrt(x)) for x < 2^63 (larger inputs are clamped to 2^63 - 1), bit by
 * bit, 32 fixed iterations.  The body is branch-free so the
 * verifier walks one path per iteration: with a data-dependent branch, two
 * calls in one program explored ~2^32 paths and hit the 1M-insn limit.
 * "x >= t" is the sign bit of x - t, exact because x, t < 2^63.
 */
CCL_CORE u64 ccl_isqrt64(u64 x)
{
	u64 res = 0, bit = 1ULL << 62;
	int i;

	if (x > 0x7fffffffffffffffULL)
		x = 0x7fffffffffffffffULL;
	for (i = 0; i < 32; i++) {
		u64 t = res + bit;
		u64 m = 0 - (((x - t) >> 63) ^ 1); /* all ones iff x >= t */

		x -= t & m;
		res = (res >> 1) + (bit & m);
		bit >>= 2;
	}
	return res;
}

/* Clamp v into [lo, hi]; *hit is set when v was outside. */
CCL_CORE u32 ccl_clamp_u32(u32 v, u32 lo, u32 hi, u32 *hit)
{
	if (v < lo) {
		*hit = 1;
		return lo;
	}
	if (v > hi) {
		*hit = 1;
		return hi;
	}
	return v;
}

/*
 * The round tracker, one definition of a round for every controller: a round
 * is one round trip of the connection, and a new round starts when data sent
 * after the previous round start is delivered.  "Sent after" is read from a
 * u32 mark that grows with what the sender has sent, wrap-safe:
 *   - by delivered count (ccl_round_on_delivery): the rate sample's
 *     prior_delivered, tp->delivered when the newest delivered packet was
 *     sent, against tp->delivered at the round start (as tcp_bbr.c); SACKed
 *     data counts, so rounds advance through Recovery;
 *   - by sequence (ccl_round_on_seq): the last byte the cumulative ACK covers,
 *     ack - 1, against snd_nxt at the round start (as tcp_vegas.c), for
 *     controllers on cong_avoid(), which has no rate sample.
 * Both mark the same moment on an ordinary ACK clock; CCL_STAT_ROUNDS counts
 * these round starts for every controller.
 */
struct ccl_round {
	u32 end_mark; /* first mark sent after the current round started */
	u32 cnt;      /* rounds since init */
};

/* Start counting at the current send mark (init, or after an external reset). */
CCL_CORE void ccl_round_reset(struct ccl_round *r, u32 next_mark)
{
	r->end_mark = next_mark;
}

/* Did the data this ACK delivered (up to acked_mark) start a new round?  If
 * so the next round ends with data sent from now (next_mark) on. */
CCL_CORE bool ccl_round_start(struct ccl_round *r, u32 acked_mark, u32 next_mark)
{
	if ((s32)(acked_mark - r->end_mark) < 0)
		return false;
	r->end_mark = next_mark;
	r->cnt++;
	return true;
}

CCL_CORE bool ccl_round_on_delivery(struct ccl_round *r, u32 prior_delivered, u32 delivered)
{
	return ccl_round_start(r, prior_delivered, delivered);
}

CCL_CORE bool ccl_round_on_seq(struct ccl_round *r, u32 ack, u32 snd_nxt)
{
	return ccl_round_start(r, ack - 1, snd_nxt);
}

/*
 * The guard: repair what the kernel stored when it skipped one of our hooks
 * (every controller; the BPF side is ccl_guard() in ccload_maps.bpf.h).
 *
 * The kernel this project runs on (6.18 "fc", a Firecracker guest) skips
 * every BPF trampoline program while the current task's tgid is 1 and the
 * program was not loaded by init: __bpf_prog_enter() returns 0 for them.
 * A TCP ACK or timer processed in softirq on top of PID 1 (the VM's agent)
 * then runs none of our hooks, and for the two that return a value,
 * ssthresh() and undo_cwnd(), the trampoline returns its uninitialised
 * return slot: stack garbage.  Seen twice (ctcp_plus, ub_reno):
 * snd_ssthresh = 0x8130f570, the low half of read_tsc()'s address left
 * there by an earlier retpolined clocksource read, after which PRR
 * (cwnd = in_flight + ssthresh * prr_delivered / prior_cwnd - prr_out,
 * when ssthresh - in_flight is negative as an int) set cwnd to ~1.9e9.
 *
 * So pkts_acked(), on every ACK that runs our hooks, checks what the
 * skipped ones may have left:
 *   - a reduction (CWR, Recovery, Loss) began when the kernel set
 *     high_seq = snd_nxt and stored ssthresh(); our ssthresh() and
 *     set_state() record (snd_nxt, the kernel's ssthresh) when they run.
 *     In a reduction whose high_seq is not the one recorded and whose
 *     ssthresh is not the one recorded, no hook of ours saw the value the
 *     kernel holds: replace it with Reno's, half the window at the
 *     reduction's start (prior_cwnd), at least 2;
 *   - no legitimate ssthresh exceeds TCP_INFINITE_SSTHRESH (2^31 - 1);
 *   - between our hooks, the kernel moves the window only down, to
 *     ssthresh plus what is in flight (PRR, Recovery's end), to in_flight + 1
 *     (RTO), or back to max(cwnd, prior_cwnd) (an undo); every window our
 *     cong_avoid()/cong_control() writes is recorded (ccl_guard_wrote).  A
 *     window of 0, above 2^31 - 1, or above all of those by more than 16
 *     came from a skipped hook (PRR fed a skipped ssthresh(), or a skipped
 *     undo_cwnd()): restore max(the last window recorded, prior_cwnd).
 */
#define CCL_INFINITE_SSTHRESH 0x7fffffffU

struct ccl_guard_st {
	u32 seq;       /* snd_nxt when a hook of ours last saw a reduction begin */
	u32 ssth;      /* the kernel's ssthresh then (what we returned or set) */
	u32 cwnd_last; /* the window our hooks last saw or wrote */
	u32 cwnd_hi;   /* the largest of those */
	u32 fault;     /* fault_skip (test builds): this reduction's hooks act as skipped */
};

/* What a skipped ssthresh() returns: the trampoline's uninitialised return
 * slot, as found on this kernel (docs/known-issues.md). */
#define CCL_SKIPPED_SSTH 0x8130f570U

/* A reduction began (or a controller set ssthresh) and we saw it. */
CCL_CORE void ccl_guard_mark(struct ccl_guard_st *g, u32 snd_nxt, u32 ssth)
{
	g->seq = snd_nxt;
	g->ssth = ssth;
}

/* The ssthresh to write, or 0 when the kernel's is right. */
CCL_CORE u32 ccl_guard_ssth(struct ccl_guard_st *g, u32 ca_state, u32 high_seq, u32 kern,
			    u32 prior_cwnd)
{
	u32 half = prior_cwnd <= CCL_INFINITE_SSTHRESH ? prior_cwnd / 2 : 0;
	bool unseen = ca_state >= CCL_CA_CWR && high_seq != g->seq && kern != g->ssth;

	if (!unseen && kern <= CCL_INFINITE_SSTHRESH)
		return 0;
	half = half > 2 ? half : 2;
	ccl_guard_mark(g, high_seq, half);
	return half;
}

/* Our cong_avoid()/cong_control() wrote this window (or the guard saw it). */
CCL_CORE void ccl_guard_wrote(struct ccl_guard_st *g, u32 cwnd)
{
	g->cwnd_last = cwnd;
	if (cwnd > g->cwnd_hi)
		g->cwnd_hi = cwnd;
}

/*
 * The window to write, or 0 when the kernel's is right (then recorded).
 * `ssth` is the kernel's ssthresh after ccl_guard_ssth(); TCP_INFINITE
 * (slow start) adds nothing to the bound.
 */
CCL_CORE u32 ccl_guard_cwnd(struct ccl_guard_st *g, u32 cwnd, u32 prior_cwnd, u32 ssth,
			    u32 in_flight)
{
	u64 last = g->cwnd_last, base, lim;
	u32 fix;

	if (!last) {
		last = cwnd && cwnd <= CCL_INFINITE_SSTHRESH ? cwnd : 10; /* first sight */
		ccl_guard_wrote(g, (u32)last);
	}
	/* a prior_cwnd far above any window seen is itself left by a skip */
	base = prior_cwnd <= 2 * (u64)g->cwnd_hi + 16 ? ccl_max64(last, prior_cwnd) : last;
	lim = ccl_max64(base, in_flight) + 16;
	if (ssth < CCL_INFINITE_SSTHRESH)
		lim = ccl_max64(lim, (u64)ssth + in_flight + 16);
	if (cwnd && cwnd <= CCL_INFINITE_SSTHRESH && cwnd <= lim) {
		ccl_guard_wrote(g, cwnd);
		return 0;
	}
	fix = base > 2 ? (u32)base : 2;
	ccl_guard_wrote(g, fix);
	return fix;
}

#endif /* __CCL_CORE_H */
