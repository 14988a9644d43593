/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ccload_intf.h - THE layouts shared by the BPF controllers and the Rust loader.
 *
 * Everything that crosses the user/kernel boundary is declared here, once:
 * constants, the stats index enum, the tunables struct of each algorithm (one
 * map entry per profile), the per-round telemetry record, and the per-algorithm
 * metadata kept in a pinned map.  The Rust side gets these through bindgen
 * (loader/build.rs); nothing is copied by hand.
 *
 * The header compiles under clang -target bpf (vmlinux.h provides u32 & co.)
 * and on the host (bindgen, cc) where the typedefs below stand in.
 *
 * Every tunable is a u32 (or s32) so that the loader can treat a params struct
 * as an array of named 32-bit fields whose names, ranges and units are listed
 * once here (CCL_<NAME>_PARAMS), which loader/src/bpf/algos.rs reads through the
 * descriptor tables; the BPF side clamps every field on every read.
 */
#ifndef __CCLOAD_INTF_H
#define __CCLOAD_INTF_H

#ifndef __bpf__
#include <stdint.h>
typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int32_t s32;
typedef int64_t s64;
#endif

enum ccl_consts {
	CCL_NAME_MAX = 16,	     /* TCP_CA_NAME_MAX including the NUL */
	CCL_VERSION_MAX = 24,	     /* ccl_meta.version including the NUL */
	CCL_FIELDS_MAX = 1024,	     /* ccl_meta.params_fields including the NUL */
	CCL_NR_PROFILES = 16,	     /* params map entries; 0 = the algorithm's defaults */
	CCL_RINGBUF_BYTES = 1 << 22, /* per algorithm; ~30000 telemetry records */
	/* Telemetry wakes its reader only once this much is waiting; readers
	 * drain the ring every CCL_RB_DRAIN_MS as well (ccl_event_submit()). */
	CCL_RB_WAKE_BYTES = 1 << 18,
	CCL_RB_DRAIN_MS = 100,
	CCL_CA_PRIV_SIZE = 104, /* ICSK_CA_PRIV_SIZE: per-flow controller state */
	CCL_Q10 = 1024,
	CCL_Q16 = 65536,
};

/* The fixed-point value of num/den at scale q (CCL_Q10, CCL_Q16), rounded to
 * nearest: CCL_FIX(CCL_Q16, 102, 100) is 1.02 in Q16 (66847). */
#define CCL_FIX(q, num, den) (((q) * (num) + (den) / 2) / (den))

/* Every controller, one row each: X(name, NAME, tel).  `name` is the kernel
 * name users type and the source bpf/<name>.bpf.c; NAME prefixes its tables
 * (CCL_<NAME>_PARAMS, CCL_TEL_<NAME>); `tel` is its member of the telemetry
 * union.  This is the only list of algorithms: loader/build.rs reads it to
 * build one skeleton per row and to generate the Rust `Algo` enum, and the
 * macros below generate the C enum and structs from it. */
#define CCL_ALGOS(X)                  \
	X(ccpd, CCPD, ccpd)           \
	X(hetcp, HETCP, hetcp)        \
	X(ctcp_plus, CTCP_PLUS, ctcp) \
	X(ub_reno, UB_RENO, ubl)

#define CCL_ALGO_ENUM(name, NAME, tel) CCL_ALGO_##NAME,
enum ccl_algo {
	CCL_ALGOS(CCL_ALGO_ENUM) /* CCL_ALGO_CCPD, ... */
	CCL_NR_ALGOS,
};

/* Per-CPU counters, one array per algorithm.  Descriptions live in Rust
 * (loader/src/bpf/stats.rs) next to the serde field names. */
enum ccl_stat_idx {
	CCL_STAT_FLOW_INIT = 0,	  /* init() calls: flows that chose this CC */
	CCL_STAT_FLOW_RELEASE,	  /* release() calls */
	CCL_STAT_ACKS,		  /* ACK-driven hook invocations */
	CCL_STAT_ROUNDS,	  /* round trips completed (round tracker) */
	CCL_STAT_LOSS_EVENTS,	  /* ssthresh() calls: Recovery/CWR entry or RTO */
	CCL_STAT_LOSS_HELD,	  /* packets marked lost while the window was held */
	CCL_STAT_RTO,		  /* RTOs (CA_EVENT_LOSS; Loss from Recovery) */
	CCL_STAT_UNDO,		  /* undo_cwnd() calls (spurious loss detection) */
	CCL_STAT_RB_RESERVE_FAIL, /* ring buffer full: telemetry records dropped */
	CCL_STAT_EVENTS,	  /* telemetry records written */
	CCL_STAT_PARAM_CLAMPED,	  /* tunable reads that had to be clamped */
	CCL_STAT_PROFILE_MISS,	  /* params lookup failed; built-in defaults used */
	CCL_STAT_PAIR_SAMPLES,	  /* ccpd: accepted packet-pair capacity samples */
	CCL_STAT_PAIR_REJECTS,	  /* ccpd: pair samples rejected (too fast/too close) */
	CCL_STAT_EST_SAMPLES,	  /* hetcp: GTSW bandwidth samples */
	CCL_STAT_EARLY_CUTS,	  /* ctcp_plus: rule (2) 2/3 cuts */
	CCL_STAT_EARLY_DECS,	  /* ctcp_plus: rule (3) -1/2 steps */
	CCL_STAT_LOSS_CONGESTIVE, /* ccpd: loss events classified congestive (hold at target) */
	CCL_STAT_LOSS_RANDOM,	  /* ccpd, ctcp_plus rand_keep: loss events classified random */
	CCL_STAT_WFULL_FOUND,	  /* ub_reno: rounds that found (or lowered) W_full */
	CCL_STAT_LSRTT_SHIFTS,	  /* ub_reno: LSRTT level shifts detected */
	CCL_STAT_SSTH_REPAIRED,	  /* guard: ssthresh no hook of ours saw (a skipped ssthresh()) */
	CCL_STAT_CWND_REPAIRED,	  /* guard: a window the kernel cannot produce between our hooks */
	CCL_STAT_CAP_FALLS,	  /* ccpd: capacity falls read (ccpd_rate_fall) */
	CCL_NR_STATS,
};

/* Flow phases reported in telemetry (per algorithm meaning, see each .bpf.c). */
enum ccl_phase {
	CCL_PHASE_SS = 0,     /* slow start */
	CCL_PHASE_CA = 1,     /* congestion avoidance / controlled */
	CCL_PHASE_SS_RTO = 2, /* ccpd: slow start back to the last window after RTO */
	CCL_PHASE_RI = 3,     /* hetcp: rapid increase toward the estimated BDP */
	CCL_PHASE_EP = 4,     /* ctcp_plus: early-reduction episode */
	CCL_PHASE_RAMP = 5,   /* ub_reno: extra window ramping to W_full */
	CCL_PHASE_HOLD = 6,   /* ub_reno: extra window holding at W_full */
	CCL_PHASE_ZERO = 7,   /* ub_reno: no extra window */
	CCL_NR_PHASES,
};

/* ---------------------------------------------------------------------------
 * Tunables, declared once as X-macro tables:
 *   X(field, cli_name, scale, default, min, max, unit, help)
 * field is the u32 stored in the params map; cli_name is what users type in
 * `--set cli_name=value`; the stored value is round(value * scale), so
 * `kp=2` stores kp_q10 = 2048.  default/min/max are stored (raw) values.
 * The same table generates: the params structs below, the BPF clamps and
 * fallback defaults (ccl_params in ccload_maps.bpf.h), and the descriptor arrays that the Rust
 * loader validates against (bpf/core/host_core.c -> bindgen).
 * ------------------------------------------------------------------------- */

/* One aligned row per tunable (clang-format would split the rows). */
/* clang-format off */
/* CCPD (docs/ccpd.md, "Tunables") */
/* What ccpd is for, one line (`ccload algos`). */
#define CCL_CCPD_PURPOSE "delay-based window control (PD, Smith predictor): the link's rate at a small queue, random loss held"
#define CCL_CCPD_PARAMS(X)                                                                      \
	X(mode, "mode", 1, 1, 0, 1, "", "0 = literal Eq. 3 (L0, per ACK), 1 = L1 full-utilising law") \
	X(kp_q10, "kp", CCL_Q10, 2 * CCL_Q10, CCL_Q10 / 4, 16 * CCL_Q10, "", "Kp, window segments per segment of free storage") \
	X(kd_ms, "kd", 1, 100, 0, 10000, "ms", "Kd, derivative gain time constant; 0 disables D") \
	X(g_max_q10, "g_max", CCL_Q10, CCL_Q10 / 4, 0, CCL_Q10, "", "clamp of Kd/dt (stability margin)") \
	X(gamma_q10, "gamma", CCL_Q10, 0, 0, CCL_Q10, "", "L1 smoothing gain; 0 = auto 1/(1+2Kp)") \
	X(b_min, "b_min", 1, 4, 0, 1000, "segments", "floor of the buffer estimate B")          \
	X(cwnd_min, "cwnd_min", 1, 2, 2, 64, "segments", "smallest window")                     \
	X(probe_segs, "probe_segs", 1, 2, 1, 8, "segments", "packet-pair unit")                 \
	X(probe_every, "probe_every", 1, 1, 1, 64, "rounds", "rounds between pair attempts")    \
	X(cap_epoch, "cap_epoch", 1, 8, 1, 64, "rounds", "CapProbe min-RTT-sum filter epoch")   \
	X(cap_max_mbps, "cap_max", 1, 0, 0, 400000, "Mbit/s", "reject faster pair samples; 0 = off") \
	X(pair_min_ns, "pair_min", 1, 10000, 0, 1000000, "ns", "reject smaller ACK dispersions") \
	X(bmax_on_loss, "bmax_on_loss", 1, 1, 0, 2, "", "on a loss in CA set rtt_max to rtts: 0 never, 1 congestive losses, 2 every loss") \
	X(q_rtt, "q_rtt", 1, 0, 0, 1, "", "RTT the L1 law reads the queue from: 0 smoothed (paper) less its noise (q_noise), 1 the round's minimum") \
	X(q_little, "q_little", 1, 1, 0, 1, "", "1 = in flight under fb m, the L1 law takes the RTT's excess over 17/16 in_flight / fb (Little's law) for the link's own delay, down to the round's smallest sample") \
	X(q_noise_us, "q_noise", 1, 500, 0, 100000, "us", "q_rtt 0: the smoothed RTT's excess over the round's smallest sample taken for noise, up to this; 0 = none (paper)") \
	X(rtt_floor_us, "rtt_floor", 1, 250, 0, 10000, "us", "the smallest base RTT m the law uses: below it RTT swings are the hosts', not a queue's; 0 = none (paper)") \
	X(q_floor_us, "q_floor", 1, 250, 0, 10000, "us", "m under 1 ms: the largest RTT noise over m, learned on rounds whose window is under the pipe, that the law adds to m; 0 = none (paper)") \
	X(ss_exit, "ss_exit", 1, 2, 0, 2, "", "1 = slow start ends when the RTT shows a queue; 2 = a delay exit is taken at its round's end if the round's smallest RTT still shows it; 0 = at the first loss (paper)") \
	X(share, "share", 1, 1, 0, 1, "", "1 = share a bottleneck (C from pairs, synchronised drains, competitive mode); 0 = one flow's law") \
	X(drain_ms, "drain_ms", 1, 5000, 500, 60000, "ms", "share: period of the synchronised queue drains") \
	X(probe_up, "probe_up", 1, 1, 0, 1, "", "1 = until the first loss, while B is under 2 b_min (no queue seen), a law round with free storage and x <= B/8 grows the window by an eighth, past the clamp P + B - margin: a flow whose C is its own rate probes above it") \
	X(comp_fill, "comp_fill", 1, 1, 0, 1, "", "share: competing, a round whose smoothed RTT shows no queue (nobody keeps one) grows the window by half, up to the pipe C m; 0 = s / 10 ms a round") \
	X(pace, "pace", 1, 1, 0, 1, "", "1 = paced at 1.2x W/srtt (2x in slow start; not under rtt_floor), pair quota back to back; 0 = unpaced (paper)") \
	X(trace_every, "trace_every", 1, 1, 0, 1000, "rounds", "telemetry every N rounds; 0 = off") \
	X(trace_ms, "trace_ms", 1, 1, 0, 60000, "ms", "at most one record per flow per N ms (a LAN's rounds last tens of us); 0 = no time limit")

/* HE-TCP (docs/hetcp.md, "Tunables") */
/* What hetcp is for, one line (`ccload algos`). */
#define CCL_HETCP_PURPOSE "Reno whose backoff follows a bandwidth estimate (GTSW): long paths with random loss"
#define CCL_HETCP_PARAMS(X)                                                                     \
	X(count_mode, "count_mode", 1, 1, 0, 1, "", "0 = count ACK events, 1 = acked segments") \
	X(rtt_src, "rtt_src", 1, 0, 0, 1, "", "RTT in T_ratio: 0 = BaseRTT (Fig. 2), 1 = srtt (Eq. 2)") \
	X(si_div, "si_div", 1, 10, 1, 100, "", "SampleInterval = cwnd / si_div")                \
	X(si_small, "si_small", 1, 10, 1, 1000, "segments", "below this cwnd SampleInterval = 1") \
	X(low_wnd, "low_wnd", 1, 0, 0, 10000, "segments", "below it ssthresh is not written (Reno)") \
	X(ss_mode, "ss_mode", 1, 0, 0, 2, "", "slow start: 0 = ends once a queue stands, 1 = max(GTSW, burst), 2 = literal Fig. 2") \
	X(rto_reset, "rto_reset", 1, 0, 0, 1, "", "1 = reset the estimator on RTO too")         \
	X(loss_bw, "loss_bw", 1, 1, 0, 1, "", "after a loss: 1 = estimate kept, RI toward BW x BaseRTT; 0 = restarts from 0 (Fig. 2 literally)") \
	X(ssth_floor, "ssth_floor", 1, 2, 2, 100, "segments", "floor of the written ssthresh")  \
	X(ai_rtt_ms, "ai_rtt_ms", 1, 25, 0, 1000, "ms", "above this base RTT congestion avoidance grows BaseRTT/ai_rtt_ms segments a round, one per ai_rtt_ms of time (H-TCP's RTT scaling); 0 = one a round (Reno, the paper)") \
	X(trace_every, "trace_every", 1, 1, 0, 1000, "samples", "telemetry every N samples; 0 = off") \
	X(trace_ms, "trace_ms", 1, 0, 0, 60000, "ms", "at most one record per flow per N ms; 0 = no time limit")

/* Compound TCP+ (docs/ctcp_plus.md, "Tunables") */
/* What ctcp_plus is for, one line (`ccload algos`). */
#define CCL_CTCP_PLUS_PURPOSE "Compound TCP with the CTCP+ early reduction: long fat paths with small buffers, fair to Reno"
#define CCL_CTCP_PLUS_PARAMS(X)                                                                 \
	X(alpha_q10, "alpha", CCL_Q10, CCL_Q10 / 8, 0, CCL_Q10, "", "dwnd growth alpha*swnd^(3/4) - 1") \
	X(beta_q10, "beta", CCL_Q10, CCL_Q10 / 2, 0, CCL_Q10, "", "multiplicative decrease of swnd on loss") \
	X(zeta_q10, "zeta", CCL_Q10, 2 * CCL_Q10, 0, 4 * CCL_Q10, "", "dwnd shrink per segment of Diff") \
	X(gamma, "gamma", 1, 30, 1, 1000, "segments", "Diff threshold (early congestion)")      \
	X(gamma_tune, "gamma_tune", 1, 2, 0, 2, "", "TUBE gamma tuning (5..30) at each loss: 2 = one gamma per path, shared by its flows; 1 = each flow its own (the paper); 0 = off") \
	X(low_wnd, "low_wnd", 1, 0, 0, 10000, "segments", "delay component active above (the Compound draft: 38; 0 = at any window)")      \
	X(min_samples, "min_samples", 1, 3, 1, 16, "", "RTT samples per round for an update")   \
	X(rtt_mode, "rtt_mode", 1, 1, 0, 1, "", "round RTT: 0 = min, 1 = mean")                 \
	X(win_mode, "win_mode", 1, 0, 0, 1, "", "Diff window: 0 = swnd, 1 = sent in last round") \
	X(plus, "plus", 1, 1, 0, 1, "", "1 = CTCP+ rules (2)-(4), 0 = plain Compound TCP")      \
	X(plus_md_q10, "plus_md", CCL_Q10, CCL_FIX(CCL_Q10, 2, 3), CCL_Q10 / 2, CCL_Q10, "", "rule (2) loss-window factor (2/3)") \
	X(plus_dec_q10, "plus_dec", CCL_Q10, CCL_Q10 / 2, 0, 4 * CCL_Q10, "segments", "rule (3) decrease per RTT") \
	X(keep_pipe, "keep_pipe", 1, 1, 0, 1, "", "with plus: the delay brake and rule (2) stop at the pipe swnd baseRTT/RTT; 0 = as the seed") \
	X(gamma_exit, "gamma_exit", 1, 0, 0, 1000, "segments", "episode exit threshold; 0 = gamma") \
	X(ep_rounds, "ep_rounds", 1, 4, 0, 254, "rounds", "an episode that outlasts this many rounds, or ends with its queue kept, met another sender's queue: its cut is undone and the loss window grows as Reno's until a loss (with probe_ms: while competing); 0 = never (the seed)") \
	X(ep_per_loss, "ep_per_loss", 1, 1, 0, 254, "episodes", "CTCP+ episodes (rules 2-4) between two losses (with probe_ms: counted while competing), each once dwnd has grown since the loss; after them the loss window grows as Reno's and only the delay window brakes; 0 = any number (the seed)") \
	X(probe_ms, "probe_ms", 1, 2000, 0, 60000, "ms", "every probe_ms of the host clock all ctcp_plus flows hold their pipe for 4 rounds (the cut and 3 more); a queue that stays is another sender's and ep_per_loss/ep_rounds apply until a probe, from the third after a loss, finds it gone; 0 = they always apply") \
	X(probe_keep, "probe_keep", 1, 0, 0, 1, "", "1 = a probe that finds no other sender's queue gives back gamma segments of the queue it drained (Compound's operating point) at once; 0 = the window regrows from the pipe") \
	X(spread, "spread", 1, 0, 0, 1, "", "1 = a round's dwnd growth is added over the next round's ACKs; 0 = one step") \
	X(plateau_q10, "plateau", CCL_Q10, CCL_FIX(CCL_Q10, 7, 8), 0, CCL_Q10, "", "dwnd stops growing at this fraction of the window of the last loss until swnd passes it; 0 = off") \
	X(plateau_ms, "plateau_ms", 1, 1000, 0, 10000, "ms", "with plateau: dwnd crosses the zone from plateau x w_loss to w_loss in this time; 0 = Reno's growth only") \
	X(rand_keep, "rand_keep", 1, 1, 0, 1, "", "1 = a loss seen with a queue under 1/4 of the largest seen (itself >= baseRTT/4) is random: the cut keeps the pipe swnd baseRTT/RTT") \
	X(trace_every, "trace_every", 1, 1, 0, 1000, "rounds", "telemetry every N rounds; 0 = off") \
	X(trace_ms, "trace_ms", 1, 0, 0, 60000, "ms", "at most one record per flow per N ms; 0 = no time limit")

/* Hyun & Jang under-buffered-link Reno (docs/ub_reno.md, "Tunables") */
/* What ub_reno is for, one line (`ccload algos`). */
#define CCL_UB_RENO_PURPOSE "Reno plus an extra window for buffers far below the BDP"
#define CCL_UB_RENO_PARAMS(X)                                                                   \
	X(alpha_q16, "alpha", CCL_Q16, CCL_FIX(CCL_Q16, 102, 100), CCL_Q16, 2 * CCL_Q16, "", "congestion when C(t) > alpha") \
	X(beta_q16, "beta", CCL_Q16, CCL_FIX(CCL_Q16, 97, 100), CCL_Q16 / 2, CCL_Q16, "", "W_full = cwnd_p(t*) * beta") \
	X(a_q16, "a", CCL_Q16, CCL_FIX(CCL_Q16, 110, 100), CCL_Q16, 2 * CCL_Q16, "", "ramp growth of cwnd_p per round") \
	X(extra_enable, "extra", 1, 1, 0, 1, "", "0 = plain Reno")                              \
	X(md_base, "md_base", 1, 0, 0, 1, "", "loss halves: 0 = Reno window, 1 = cwnd_p")       \
	X(rto_keep_wfull, "rto_keep_wfull", 1, 1, 0, 1, "", "keep W_full across an RTO")        \
	X(zero_on_c, "zero_on_c", 1, 0, 0, 1, "", "1 = literal: C > alpha zeroes the extra window, no t* keeps W_full; 0 = lower W_full by beta, raise it to what a cycle held with no queue") \
	X(c_rounds, "c_rounds", 1, 2, 1, 8, "rounds", "rounds in a row with C > alpha before W_full is lowered in RAMP/HOLD") \
	X(ls_shift, "ls_shift", 1, 4, 1, 8, "", "LSRTT EWMA gain 2^-n between level shifts")    \
	X(ls_nu_shift, "ls_nu_shift", 1, 6, 3, 10, "", "CUSUM drift = mean / 2^n")              \
	X(ls_nu_min_us, "ls_nu_min", 1, 20, 0, 10000, "us", "CUSUM drift floor")                \
	X(ls_h_mult, "ls_h_mult", 1, 4, 1, 32, "", "CUSUM threshold in mean abs deviations")    \
	X(ls_dev_min_us, "ls_dev_min", 1, 50, 1, 10000, "us", "deviation floor")                \
	X(ls_warm, "ls_warm", 1, 8, 1, 64, "samples", "plain-mean warm-up")                     \
	X(trace_every, "trace_every", 1, 1, 0, 1000, "rounds", "telemetry every N rounds; 0 = off") \
	X(trace_ms, "trace_ms", 1, 0, 0, 60000, "ms", "at most one record per flow per N ms; 0 = no time limit")

/*
 * Tunables for the integration tests only, the last rows of every
 * controller's table (its struct, clamps and descriptors).  ccload refuses
 * them by name and leaves them 0; a test that injects a fault writes the
 * row into the pinned params map itself (tests/src/lib.rs, set_test_param).
 */
#define CCL_TEST_PARAMS(X) \
	X(fault_skip, "fault_skip", 1, 0, 0, 1000, "", "tests only (they write it into the map): 1 in N ssthresh() calls returns what one the kernel skipped returns; 0 = off")
enum ccl_test_consts { CCL_NR_TEST_PARAMS = 1 }; /* its rows, last in every table */

/*
 * The upgrade tests' fixture objects only (tests/build.rs compiles ccpd
 * with CCL_FIXTURE_LAYOUT): one tunable more, before the test-only rows, so
 * that the fixture's params layout differs from this build's in size and in
 * the offsets of the rows after it, as an older or newer release's would
 * (and a ring of another size, ccload_maps.bpf.h, so that the upgrade
 * renews `events` too).  No build of ccload defines it.
 */
#ifdef CCL_FIXTURE_LAYOUT
#define CCL_FIXTURE_PARAMS(X) X(fixture_extra, "fixture_extra", 1, 7, 0, 100, "", "fixture objects of the upgrade tests only")
#else
#define CCL_FIXTURE_PARAMS(X)
#endif
/* clang-format on */

#define CCL_PARAM_FIELD(field, name, scale, def, lo, hi, unit, help) u32 field;

/* struct ccl_<name>_params, one per CCL_ALGOS row. */
#define CCL_PARAMS_STRUCT(name, NAME, tel)                                               \
	struct ccl_##name##_params {                                                     \
		CCL_##NAME##_PARAMS(CCL_PARAM_FIELD) CCL_FIXTURE_PARAMS(CCL_PARAM_FIELD) \
			CCL_TEST_PARAMS(CCL_PARAM_FIELD)                                 \
	};
CCL_ALGOS(CCL_PARAMS_STRUCT)

/* Host-side descriptor of one tunable (arrays in bpf/core/host_core.c). */
struct ccl_param_desc {
	const char *field;
	const char *name;
	u32 scale;
	u32 def;
	u32 min;
	u32 max;
	const char *unit;
	const char *help;
};

/* ---------------------------------------------------------------------------
 * Telemetry: one record per flow per round (or every trace_every rounds).
 * ------------------------------------------------------------------------- */

/* Per-algorithm telemetry fields, as X-macro tables X(type, field, unit, help):
 * they generate the structs below and the host descriptor tables the loader
 * decodes records with (name, offset, type), so `ccload watch` prints new
 * fields without Rust changes. */
/* clang-format off */
#define CCL_TEL_CCPD(X)                                                        \
	X(u32, cap_sps, "seg/s", "C-hat from packet pairs (0 = none yet)")     \
	X(u32, fb_sps, "seg/s", "max delivery rate")                           \
	X(u32, c_sps, "seg/s", "capacity used by the law, max(cap, fb)")       \
	X(u32, pair_c_sps, "seg/s", "best pair sample of the current epoch")   \
	X(u32, pair_dsum_us, "us", "its RTT sum")                              \
	X(u32, rtt_min_us, "us", "own min RTT")                                \
	X(u32, noise_us, "us", "RTT noise floor the law adds to rtt_min (LAN)") \
	X(u32, rtt_max_us, "us", "max of own smoothed RTT")                    \
	X(u32, rtts_us, "us", "own smoothed RTT")                              \
	X(u32, p_q10, "seg/1024", "pipe C*rtt_min")                            \
	X(u32, b_q10, "seg/1024", "buffer estimate B")                         \
	X(u32, x_q10, "seg/1024", "buffer level estimate x")                   \
	X(u32, d_q10, "seg/1024", "own queued segments (L1) / in flight (L0)") \
	X(s32, e_q10, "seg/1024", "error B - x - d")                           \
	X(u32, g_q10, "1/1024", "derivative gain Kd/dt")                       \
	X(s32, dterm_q10, "seg/1024", "derivative term D")                     \
	X(s32, delta_q10, "seg/1024", "L1 window change before gamma")         \
	X(u32, w_q10, "seg/1024", "CCPD window")                               \
	X(u32, cwnd_hold, "seg", "window held in recovery")                    \
	X(u32, mode, "", "law in force: 0 = L0, 1 = L1, 2 = draining, 3 = competing")                      \
	X(u32, cwnd_max, "seg", "clamp P + B - margin (0 = no estimate)")      \
	X(u32, loss_class, "", "last loss: 1 = congestive, 2 = random")

#define CCL_TEL_HETCP(X)                                       \
	X(u64, cur_bw_q8, "seg/s/256", "CurBW")                \
	X(u64, bw_q8, "seg/s/256", "GTSW estimate BW")         \
	X(u32, sample_interval, "seg", "SampleInterval")       \
	X(u32, ack_cnt, "seg", "counted at this sample")       \
	X(u32, del_us, "us", "time since the previous sample") \
	X(u32, t_ratio_q16, "1/65536", "a_k")                  \
	X(u32, bw_mbps, "Mbit/s", "BW with the flow's MSS")    \
	X(u32, gtsw_ssth, "seg", "BW * BaseRTT")               \
	X(u32, base_rtt_us, "us", "min RTT")                   \
	X(u32, losses, "", "loss events seen by this flow")

#define CCL_TEL_CTCP_PLUS(X)                                       \
	X(u32, base_rtt_us, "us", "min RTT ever")                  \
	X(u32, round_rtt_us, "us", "RTT used for Diff this round") \
	X(u32, cnt_rtt, "", "RTT samples this round")              \
	X(u32, win, "seg", "window used for Diff")                 \
	X(u32, diff_q10, "seg/1024", "Diff")                       \
	X(u32, gamma, "seg", "current gamma")                      \
	X(u32, dwnd_q10, "seg/1024", "delay window")               \
	X(u32, cwnd_l, "seg", "loss window")                       \
	X(u32, swnd, "seg", "cwnd_l + dwnd")                       \
	X(u32, ep, "", "1 = early-reduction episode")              \
	X(u32, n_cut2, "", "rule (2) cuts so far")                 \
	X(u32, n_dec3, "", "rule (3) decrements so far")           \
	X(u32, losses, "", "loss events")                          \
	X(u32, rule, "", "bit set of enum ccl_ctcp_rule fired this round")

enum ccl_ctcp_rule {
	CCL_CTCP_GROW = 1,
	CCL_CTCP_SHRINK = 2,
	CCL_CTCP_CUT2 = 4,
	CCL_CTCP_DEC3 = 8,
	CCL_CTCP_EXIT = 16,
	CCL_CTCP_YIELD = 32, /* ep_rounds: the episode's cut undone */
	CCL_CTCP_PROBE = 64, /* probe_ms: holding the pipe to see the queue's floor */
	CCL_CTCP_COMP = 128, /* probe_ms: competing (another sender keeps the queue) */
};

#define CCL_TEL_UB_RENO(X)                                        \
	X(u32, lsrtt_us, "us", "level-shift-aware smoothed RTT")  \
	X(u32, rtt_us, "us", "last RTT sample")                   \
	X(u32, rtt_min_us, "us", "min RTT")                       \
	X(u32, c_q16, "1/65536", "C(t) = LSRTT / RTT_min")        \
	X(u32, gp_us, "us", "CUSUM up statistic")                 \
	X(u32, gn_us, "us", "CUSUM down statistic")               \
	X(u32, det_up, "", "level shifts detected upward")        \
	X(u32, det_dn, "", "level shifts detected downward")      \
	X(u32, cycle, "", "CA cycle index")                       \
	X(u32, cwnd_r, "seg", "Reno window")                      \
	X(u32, extra, "seg", "extra window")                      \
	X(u32, wfull_prev, "seg", "W_full of the previous cycle") \
	X(u32, wfull_cur, "seg", "W_full measured in this cycle") \
	X(u32, found, "", "t* seen in this cycle")
/* clang-format on */

#define CCL_TEL_FIELD(type, field, unit, help) type field;

/* struct ccl_tel_<tel>, one per CCL_ALGOS row. */
#define CCL_TEL_STRUCT(name, NAME, tel)       \
	struct ccl_tel_##tel {                \
		CCL_TEL_##NAME(CCL_TEL_FIELD) \
	};
CCL_ALGOS(CCL_TEL_STRUCT)

/* Host-side descriptor of one telemetry field (bpf/core/host_core.c). */
struct ccl_tel_desc {
	const char *name;
	const char *unit;
	const char *help;
	u32 offset; /* in struct ccl_event */
	u32 size;   /* 4 or 8 */
	u32 is_signed;
};

struct ccl_event {
	u64 cookie;	  /* socket cookie (0 if never requested) */
	u64 mstamp_us;	  /* tp->tcp_mstamp, us */
	u32 algo;	  /* enum ccl_algo */
	u32 round;	  /* flow's round counter */
	u32 snd_cwnd;	  /* segments */
	u32 snd_ssthresh; /* segments */
	u32 srtt_us;	  /* kernel smoothed RTT, us */
	u32 in_flight;	  /* segments */
	u32 mss;	  /* bytes */
	u16 family;	  /* AF_INET / AF_INET6 */
	u16 sport;	  /* host order */
	u16 dport;	  /* host order */
	u8 ca_state;	  /* TCP_CA_Open .. TCP_CA_Loss */
	u8 phase;	  /* enum ccl_phase */
	u32 profile;	  /* params profile id in use */
	u8 saddr[16];	  /* IPv4 in the first 4 bytes */
	u8 daddr[16];
	union {
#define CCL_TEL_MEMBER(name, NAME, tel) struct ccl_tel_##tel tel;
		CCL_ALGOS(CCL_TEL_MEMBER)
	} u;
};

/* ---------------------------------------------------------------------------
 * Aggregates: what metrics are made of.  Kept in the kernel, in per-CPU maps,
 * so they are exact whatever the ring buffer drops:
 *   - per (algorithm, profile) by every controller: the `agg` map of its
 *     object, one entry per profile (ccload_agg.bpf.h);
 *   - per cgroup by the cgroup sock_ops program, for sockets on any CC (a
 *     bound cgroup, or a watched one that keeps its CC).
 * Counters are summed over CPUs by the reader; histograms are log-linear
 * (8 linear steps per power of two: ~9 % wide buckets), so quantiles such as
 * an srtt p95 are good to a few percent.  Sampling and bucket arithmetic are
 * pure functions in bpf/core/agg_core.h.
 * ------------------------------------------------------------------------- */

/* Counters, X(field, unit, help); `unit` "" = a count. */
/* clang-format off */
#define CCL_AGG_COUNTERS(X)                                                              \
	X(flows_started, "", "flows that started: controller init, or established in the cgroup") \
	X(flows_ended, "", "flows that ended: controller release, or closed in the cgroup") \
	X(samples, "", "per-flow samples in the histograms (one per flow per smoothed RTT)") \
	X(bytes_acked, "bytes", "bytes acknowledged by the receivers")                   \
	X(segs_out, "segments", "data segments sent, retransmissions included")          \
	X(retrans_segs, "segments", "data segments retransmitted")                       \
	X(loss_events, "", "entries into fast recovery (one per loss episode)")          \
	X(rtos, "", "retransmission timeouts")                                           \
	X(recovery_ns, "ns", "time flows spent in Recovery or Loss, summed over flows")  \
	X(srtt_sum_us, "us", "sum of the sampled smoothed RTTs")                         \
	X(cwnd_sum, "segments", "sum of the sampled windows")                            \
	X(rate_sum_kbps, "kbit/s", "sum of the sampled delivery rates")                  \
	X(fct_sum_us, "us", "sum of the short flows' completion times (fct)")

/* Histograms, X(name, unit, help): one sample per flow per smoothed RTT. */
#define CCL_AGG_HISTS(X)                                          \
	X(srtt, "us", "smoothed RTT")                             \
	X(cwnd, "segments", "congestion window")                  \
	X(rate, "kbit/s", "delivery rate (the kernel's rate sample)") \
	X(fct, "us", "completion time of a short flow (at most 1 MiB each way): start to close")
/* clang-format on */

#define CCL_AGG_COUNTER_ENUM(field, unit, help) CCL_AGG_##field,
enum ccl_agg_counter {
	CCL_AGG_COUNTERS(CCL_AGG_COUNTER_ENUM) /* CCL_AGG_flows_started, ... */
	CCL_AGG_NR_COUNTERS,
};

#define CCL_AGG_HIST_ENUM(name, unit, help) CCL_HIST_##name,
enum ccl_agg_hist {
	CCL_AGG_HISTS(CCL_AGG_HIST_ENUM) /* CCL_HIST_srtt, ... */
	CCL_AGG_NR_HISTS,
};

enum ccl_hist_consts {
	CCL_HIST_SUB_BITS = 3,		       /* 8 linear steps per power of two */
	CCL_HIST_SUB = 1 << CCL_HIST_SUB_BITS, /* values below it have exact buckets */
	CCL_HIST_BUCKETS = 256,		       /* covers 0 .. 2^34 */
};

/* A short flow, whose completion time goes into the fct histogram: one
 * that ends having moved at most this many bytes each way (acked by its
 * peer, received from it). */
enum ccl_agg_consts {
	CCL_AGG_SHORT_BYTES = 1 << 20,
};

/* One aggregate slot (per CPU). */
struct ccl_agg {
	u64 c[CCL_AGG_NR_COUNTERS];
	u64 hist[CCL_AGG_NR_HISTS][CCL_HIST_BUCKETS];
};

/* Per-socket bookkeeping of the aggregates (socket storage, one per object). */
struct ccl_agg_sk {
	u64 hist_ns;	  /* when the flow was last sampled into the histograms */
	u64 rec_start_ns; /* when it entered Recovery/Loss; 0 = not in it */
	u64 trace_ns;	  /* when it was last traced (trace_ms) */
	u64 bytes_acked;  /* counters at the last flush, for deltas */
	u32 segs_out;
	u32 retrans;
	u32 ca_state; /* last state seen */
	u32 started;  /* 1 = counted in flows_started */
	u32 slot;     /* its slot in the agg map (the profile, for controllers) */
	u32 pad;
	u64 start_ns; /* when it started: its completion time at the end */
};

/* What a hook knows about a flow at one instant (inputs of agg_core.h). */
struct ccl_agg_in {
	u64 now_ns;
	u64 bytes_acked;
	u32 srtt_us;
	u32 cwnd;
	u32 mss;
	u32 rate_delivered;   /* segments, of the last rate sample */
	u32 rate_interval_us; /* its interval; 0 = no sample */
	u32 segs_out;	      /* tp->data_segs_out */
	u32 total_retrans;
	u64 bytes_received; /* for the short-flow test (fct) */
};

/* Host-side descriptor of one counter or histogram (bpf/core/host_core.c). */
struct ccl_agg_desc {
	const char *name;
	const char *unit;
	const char *help;
};

/* Per-socket binding written by the cgroup sock_ops program (bpf/cgroup.bpf.c)
 * into the shared socket-storage map pinned at <pin root>/sk_profile; the
 * controllers read `profile` to pick their tunables. */
struct ccl_sk_binding {
	u32 profile;
	u32 cgroup_bound; /* 1 = set by a cgroup binding */
};

/* A cgroup binding, in the `binding` map of its sock_ops object.  `algo`
 * and `profile` are the default: what a connection gets when none of the
 * binding's `nr_rules` path rules matches it. */
struct ccl_cg_binding {
	char algo[CCL_NAME_MAX]; /* TCP_CONGESTION name given to the sockets */
	u64 cgroup_id;
	u32 profile;
	u32 nr_rules; /* path rules in the `rules` map, 0..CCL_CG_MAX_RULES */
};

/*
 * Path rules of a cgroup binding (bpf/cgroup.bpf.c): the first rule, in
 * order, that matches a connection chooses its congestion control and
 * profile; none matching, the binding's own.  A prefix rule matches a peer
 * address inside one of its prefixes (the `prefixes` LPM trie maps each
 * prefix to its rule; ccload refuses prefixes of two rules that overlap, so
 * the longest match is the only one).  An RTT rule matches on the
 * connection's smoothed RTT when it is established (the handshake's sample):
 * a connection is given the choice of the rules decidable at connect() and
 * switched once, when established, if an RTT rule before it matches.  A
 * share rule matches a fixed share of the connections, chosen by a keyed
 * hash of their addresses and ports (ccl_conn_hash): the arms of an A/B
 * comparison inside one cgroup.
 */
enum ccl_cg_consts {
	CCL_CG_MAX_RULES = 15, /* agg slots 1..15; slot 0 = no rule matched */
};

enum ccl_rule_kind {
	CCL_RULE_PREFIX = 1, /* the peer's address in one of its prefixes */
	CCL_RULE_RTT_GE = 2, /* smoothed RTT >= arg us when established */
	CCL_RULE_RTT_LT = 3, /* smoothed RTT < arg us when established */
	CCL_RULE_SHARE = 4,  /* ccl_conn_hash(key, ...) < arg (all: arg 2^32 - 1) */
};

struct ccl_path_rule {
	char algo[CCL_NAME_MAX];
	u32 kind; /* enum ccl_rule_kind */
	u32 profile;
	u32 arg; /* RTT rules: the bound, us; share rules: the share * 2^32 */
	u32 key; /* share rules: the hash's key */
};

/* Key of the `prefixes` LPM trie: IPv4 as IPv4-mapped IPv6 (::ffff:a.b.c.d,
 * its prefix length + 96). */
struct ccl_prefix_key {
	u32 prefixlen;
	u8 addr[16];
};

/* Counters of a cgroup binding (`cg_stats` map, per CPU). */
enum ccl_cg_stat {
	CCL_CG_ACTIVE = 0, /* connect()s bound */
	CCL_CG_PASSIVE,	   /* accepted connections bound */
	CCL_CG_ERRORS,	   /* bpf_setsockopt(TCP_CONGESTION) failures */
	CCL_CG_NR_STATS,
};

/*
 * What ccload records about an attachment (`meta` map, one entry).  It only
 * grows at its end: a ccload reads another release's entry as the prefix
 * they share (loader/src/bpf/layout.rs), and the params by the field names
 * recorded here.  One entry, pinned with each attached algorithm: it also
 * holds what `detach` must restore.
 */
struct ccl_meta {
	char prev_default[CCL_NAME_MAX]; /* default CC replaced by --default, "" = none */
	u64 attached_unix_s;		 /* wall-clock attach time */
	u32 default_set;		 /* 1 = attach --default changed the sysctl */
	u32 watchers;			 /* pid of the ring-buffer consumer, 0 = none */
	u64 layout_id;			 /* layout identity of the loading ccload, 0 = unknown */
	u64 obj_id;			 /* identity of the BPF object it loaded, 0 = in change */
	u64 upgraded_unix_s;		 /* last in-place upgrade, 0 = none */
	char version[CCL_VERSION_MAX];	 /* release of the ccload that loaded the object */
	char params_fields[CCL_FIELDS_MAX]; /* its params' C field names in order, ","-separated */
};

#endif /* __CCLOAD_INTF_H */
